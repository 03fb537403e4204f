package access

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/mcs"
)

// Names of the objects a primary owns in a secondary, derived from its ID so that two primaries
// sharing a secondary never share an identity.
type Names struct {
	PrimaryID      string
	ServiceAccount string // in flotilla-system
	ClusterRole    string // and its ClusterRoleBinding
	TokenRole      string // Role (and RoleBinding) in flotilla-system for the token renewal
	AgentRole      string // Role (and RoleBinding) in flotilla-system for the agent's credential (pull mode)
	Params         string // ConfigMap in flotilla-system that held the policy's parameters (joins before v0.2; removed by `cluster remove`)
	Policy         string // ValidatingAdmissionPolicy and its binding
	DelegatePolicy string // ValidatingAdmissionPolicy (and binding) keeping a delegate's flotilla.dev/* the identity's alone
	// AllowancePolicy is the ValidatingAdmissionPolicy (and binding) that, while the primary's
	// PrimaryAllowance exists, admits its workloads only in namespaces whose quota is in force.
	AllowancePolicy string
	// Consumer is the ServiceAccount in flotilla-system (and its ClusterRoleBinding) the fleet
	// inventory's readers reach the secondary as, when its admin chose a role for them at join.
	Consumer string
	// MultiKueueRole is the ClusterRole join makes for the readers with --consumer-role
	// multikueue: what a MultiKueue manager needs in a worker.
	MultiKueueRole string
}

// NamesFor returns the names for a primary ID.
func NamesFor(primaryID string) Names {
	short := primaryID
	if len(short) > 8 {
		short = short[:8]
	}
	base := "flotilla-" + short
	return Names{PrimaryID: primaryID, ServiceAccount: base, ClusterRole: "flotilla:primary:" + short,
		TokenRole: base + "-token", AgentRole: base + "-agent", Params: base + "-params", Policy: base + "-managed-namespaces",
		DelegatePolicy: base + "-delegates", AllowancePolicy: base + "-allowance", Consumer: base + "-consumer",
		MultiKueueRole: "flotilla:consumer:multikueue:" + short}
}

// Username is the identity the secondary's API server sees for the primary's ServiceAccount.
func (n Names) Username() string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", flotillav1.SystemNamespace, n.ServiceAccount)
}

// Grant is one RBAC rule of a primary in a secondary and the code path that needs it.
type Grant struct {
	Rule rbacv1.PolicyRule
	Why  string
}

var (
	watched  = []string{"get", "list", "watch"}
	informed = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
)

// Grants are the ClusterRole rules of a primary in a secondary, each with its reason: only what a
// code path uses. Writes are further confined to managed namespaces by the admission policy. RBAC
// cannot select namespaces by label, so what must be read or watched is granted cluster-wide. The
// rules of the kinds a Replicator writes and of the dependency copies are derived from their
// tables (kindGrants); the others are listed here.
func Grants(primaryID string) []Grant {
	core := func(verbs []string, resources ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: resources, Verbs: verbs}
	}
	group := func(g string, verbs []string, resources ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{g}, Resources: resources, Verbs: verbs}
	}
	grants := []Grant{
		{core(watched, "nodes"), "capacity of the virtual node (informer on nodes)"},
		{core(informed, "pods"), "capacity (informer on all pods: requests of pods that are not delegates), delegates (create, delete, informer), a Replicator's namespace check (list)"},
		{core([]string{"get", "list", "watch", "create", "patch", "delete"}, "persistentvolumeclaims"), "real claims of the primary's claims of class flotilla: created where their pod runs, expanded, deleted with their primary claim (informer on this primary's)"},
		{core([]string{"list"}, "events"), "a delegate that does not start or stay up: its Events, listed by its UID, shown on its proxy"},
		{core([]string{"get"}, "pods/log"), "kubectl logs on a proxy; the kubelet API reads only the proxy's own delegate (label and proxy UID checked)"},
		{core([]string{"update", "patch"}, "pods/ephemeralcontainers"), "kubectl debug on a proxy: its ephemeral containers added to the delegate; admitted by the policy only for this primary's delegates"},
		{core([]string{"update", "patch"}, "pods/resize"), "in-place resize of a proxy (its containers' requests and limits) carried to the delegate; admitted by the policy only for this primary's delegates"},
		{core([]string{"create"}, "pods/exec", "pods/attach", "pods/portforward"), "kubectl exec, attach and port-forward on a proxy; admitted by the policy only in managed namespaces"},
		{core([]string{"get", "list", "watch", "create", "update", "patch", "delete"}, "namespaces"), "namespaces of delegates and Replicators (created labelled managed-by, Pod Security labels kept in step), a Replicator's namespace deleted with it, those created for delegates listed (label-selected) and deleted once the primary's is gone; the managed ones watched (label-selected): only there do a secondary's ServiceExports count"},
	}
	grants = append(grants, kindGrants()...)
	listed := "listed before a Replicator deletes a namespace it created (a user's object keeps it) and, for pods, ConfigMaps and Services, by its namespace check"
	return append(grants,
		Grant{core([]string{"list"}, "pods", "configmaps", "services", "serviceaccounts", "persistentvolumeclaims"), listed},
		Grant{group("apps", []string{"list"}, "deployments", "statefulsets", "daemonsets"), listed},
		Grant{group("batch", []string{"list"}, "jobs", "cronjobs"), listed},
		Grant{group("networking.k8s.io", []string{"list"}, "ingresses"), listed},
		Grant{group("autoscaling", []string{"list"}, "horizontalpodautoscalers"), "listed in a Replicator's namespace to leave replicas alone under an HPA"},
		Grant{group("discovery.k8s.io", []string{"list"}, "endpointslices"), "a Replicator's health: the EndpointSlices of a Service it applied, listed in its namespace by the Service's name label (no informer: a pass reads them)"},
		Grant{group("discovery.k8s.io", []string{"watch", "create", "update", "patch", "delete"}, "endpointslices"), "Multi-Cluster Services: every EndpointSlice watched (an exported Service's are its endpoints), the imports' own written (managed-by flotilla.dev; the policy admits no other)"},
		Grant{group(mcs.Group, watched, mcs.ServiceExports.Resource), "Multi-Cluster Services: the ServiceExports of every namespace (informer)"},
		Grant{group(mcs.Group, []string{"update", "patch"}, mcs.ServiceExports.Resource+"/status"), "Multi-Cluster Services: a ServiceExport's Valid, Ready and Conflict conditions"},
		Grant{group(mcs.Group, informed, mcs.ServiceImports.Resource), "Multi-Cluster Services: the imports of the names exported anywhere in the set (informer on this primary's)"},
		Grant{group(mcs.Group, []string{"update", "patch"}, mcs.ServiceImports.Resource+"/status"), "Multi-Cluster Services: an import's clusters"},
		Grant{group("about.k8s.io", []string{"get", "create", "update"}, "clusterproperties"), "the cluster's ClusterSet identity (KEP-2149: cluster.clusterset.k8s.io, clusterset.k8s.io) where the About API is served; the policy lets it change only its own"},
		Grant{group("networking.k8s.io", []string{"get"}, "ingressclasses"), "a Replicator's health: whether the cluster has the class of an Ingress it applied (an ingress controller to admit it), one get by name"},
		Grant{group("resource.k8s.io", watched, "deviceclasses", "resourceslices", "resourceclaims"), "device claims (DRA) of elected pods: judged by Kubernetes' allocator over the cluster's DeviceClasses, ResourceSlices and the devices its claims hold (informers; of a claim only its allocated devices are kept), counted per class on the ClusterDetector, a delegate's allocation shown on its proxy"},
		Grant{group("metrics.k8s.io", []string{"list"}, "pods"), "kubectl top and HPAs in the primary: the delegates' usage (listed selected by this primary's label) behind the virtual nodes' resource metrics"},
		Grant{group(flotillav1.GroupVersion.Group, []string{"get", "list", "watch", "create"}, "flotillaprimaries"), "the FlotillaPrimary that owns everything of this primary there"},
		Grant{rbacv1.PolicyRule{APIGroups: []string{flotillav1.GroupVersion.Group}, Resources: []string{"flotillaprimaries"},
			Verbs: []string{"update", "patch", "delete"}, ResourceNames: []string{primaryID}}, "its own FlotillaPrimary only"},
		Grant{rbacv1.PolicyRule{APIGroups: []string{flotillav1.GroupVersion.Group}, Resources: []string{"primaryallowances"},
			Verbs: []string{"get"}, ResourceNames: []string{primaryID}}, "the most this secondary lends it (its PrimaryAllowance, read, never written): the virtual node's allocatable is the lesser of it and what is free"},
	)
}

// Rules are the ClusterRole rules of a primary in a secondary (Grants without the reasons), the
// kinds an admin allows at join aside (Limits).
func Rules(primaryID string) []rbacv1.PolicyRule {
	return rulesOf(Grants(primaryID))
}

func rulesOf(grants []Grant) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, g := range grants {
		out = append(out, g.Rule)
	}
	return out
}

// forbiddenNamespaces are never written by Flotilla, labelled or not.
var forbiddenNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease, flotillav1.SystemNamespace}

// ForbiddenNamespace says whether Flotilla never writes in a namespace of any cluster, labelled
// or not: kube-*, default and flotilla-system (the fence's list).
func ForbiddenNamespace(name string) bool {
	return strings.HasPrefix(name, "kube-") || slices.Contains(forbiddenNamespaces, name)
}

// policyExpression lets the identity write a namespaced object only in a namespace labelled
// managed-by=<primary>, and its FlotillaPrimary; create a Namespace only with that label, and
// update or delete one only if it already carries it (the old object is checked, so the identity
// cannot label a namespace to take it, another primary's included); connect to pods (exec,
// attach, port-forward: CONNECT requests) only in such namespaces; and change or delete only
// objects carrying flotilla.dev/primary=<primary>, so an object of the same name that Flotilla did
// not create (a user's Secret) is never overwritten.
//
// The primary's ID and the forbidden namespaces are literals of the expression, not parameters:
// a binding whose parameter object is missing denies every request its policy's resource rules
// match, before the match conditions narrow them to Flotilla's identity, so a deleted parameter
// ConfigMap (or a binding the API server still caches after it) stopped every user's writes in
// the secondary.
func policyExpression(primaryID string, definitions []string) string {
	id := celString(primaryID)
	definitionClause := ""
	if len(definitions) > 0 {
		// The definitions the admin allowed, created labelled as this primary's and changed only
		// while they are (a definition the cluster installed itself is never taken).
		definitionClause = `
(
  request.resource.group == 'apiextensions.k8s.io' && request.resource.resource == 'customresourcedefinitions' &&
  request.?subResource.orValue('') == '' && request.operation in ['CREATE', 'UPDATE'] && request.name in [` + celStrings(definitions) + `] &&
  object.metadata.?labels[?'` + flotillav1.LabelPrimary + `'].orValue('') == ` + id + ` &&
  (request.operation == 'CREATE' || oldObject.metadata.?labels[?'` + flotillav1.LabelPrimary + `'].orValue('') == ` + id + `)
) ||`
	}
	var forbidden []string
	for _, f := range forbiddenNamespaces {
		forbidden = append(forbidden, celString(f))
	}
	return `request.resource.resource == 'flotillaprimaries' ||` + definitionClause + `
(request.resource.group == 'about.k8s.io' && request.resource.resource == 'clusterproperties' &&
  (request.operation == 'CREATE' || oldObject.metadata.?labels[?'` + flotillav1.LabelPrimary + `'].orValue('') == ` + id + `)) ||
(
  !(request.resource.resource == 'namespaces' ? request.name : request.namespace).startsWith('kube-') &&
  !((request.resource.resource == 'namespaces' ? request.name : request.namespace) in [` + strings.Join(forbidden, ", ") + `]) &&
  (request.resource.resource == 'namespaces'
    ? (request.operation == 'CREATE' || oldObject.metadata.?labels[?'` + flotillav1.LabelManagedBy + `'].orValue('') == ` + id + `) &&
      (request.operation == 'DELETE' || object.metadata.?labels[?'` + flotillav1.LabelManagedBy + `'].orValue('') == ` + id + `)
    : namespaceObject != null && namespaceObject.metadata.?labels[?'` + flotillav1.LabelManagedBy + `'].orValue('') == ` + id + `) &&
  (request.operation in ['CREATE', 'CONNECT'] || request.resource.resource in ['namespaces', 'events'] || oldObject == null ||
    oldObject.metadata.?labels[?'` + flotillav1.LabelPrimary + `'].orValue('') == ` + id + `)
) ||
(
  !request.namespace.startsWith('kube-') && !(request.namespace in [` + strings.Join(forbidden, ", ") + `]) &&
  namespaceObject != null && namespaceObject.metadata.?labels[?'` + flotillav1.LabelManagedBy + `'].orValue('') == ` + id + ` &&
  request.resource.group == '` + mcs.Group + `' && request.resource.resource == '` + mcs.ServiceExports.Resource + `' &&
  request.?subResource.orValue('') == 'status' && request.operation == 'UPDATE'
) ||
(
  request.resource.group == '' && request.resource.resource == 'secrets' && request.namespace == '` + flotillav1.SystemNamespace + `' &&
  request.name == '` + flotillav1.AgentSecretName + `' && request.operation == 'UPDATE' && request.?subResource.orValue('') == '' &&
  oldObject.metadata.?labels[?'` + flotillav1.LabelPrimary + `'].orValue('') == ` + id + ` &&
  object.metadata.?labels[?'` + flotillav1.LabelPrimary + `'].orValue('') == ` + id + `
)`
}

// mcsShapeExpression keeps what the Multi-Cluster Services API writes to its own shape, wherever
// the fence lets the identity write (managed namespaces; ServiceImports and the status of a
// ServiceExport there need nothing more): an EndpointSlice only managed by flotilla.dev, for a
// flotilla-mcs-* Service, and carrying the name it imports (kube-proxy routes a Service to every
// EndpointSlice carrying its name, so one for another Service would steer that Service's
// traffic); a flotilla-mcs-* Service only of type ClusterIP, without selector or external IPs,
// carrying the name it imports (it gives an import its address, and selects nothing).
func mcsShapeExpression() string {
	managedBy, prefix := celString(mcs.ManagedBy), celString(mcs.DerivedServicePrefix)
	return `request.operation in ['DELETE', 'CONNECT'] || (
  (request.resource.group != 'discovery.k8s.io' || request.resource.resource != 'endpointslices' || (
    object.metadata.?labels[?'endpointslice.kubernetes.io/managed-by'].orValue('') == ` + managedBy + ` &&
    object.metadata.?labels[?'kubernetes.io/service-name'].orValue('').startsWith(` + prefix + `) &&
    object.metadata.?labels[?'multicluster.kubernetes.io/service-name'].orValue('') != '')) &&
  (request.resource.group != '' || request.resource.resource != 'services' || request.?subResource.orValue('') != '' ||
    !(request.name != '' ? request.name : object.metadata.?generateName.orValue('')).startsWith(` + prefix + `) || (
    object.spec.?type.orValue('ClusterIP') == 'ClusterIP' && object.spec.?selector.orValue({}).size() == 0 &&
    object.spec.?externalIPs.orValue([]).size() == 0 &&
    object.metadata.?labels[?'multicluster.kubernetes.io/service-name'].orValue('') != ''))
)`
}

// delegateExpression keeps the flotilla.dev/* labels and annotations of this primary's delegates
// as the identity wrote them: anyone else's update that changes, adds or removes one is refused.
// Why: the primary's delegate watch is label-selected, so a delegate relabelled in the secondary
// looks deleted to it while it still runs; and its proxy UID annotation is what proves whose
// delegate it is.
func delegateExpression(primaryID string) string {
	return `oldObject.metadata.?labels[?'` + flotillav1.LabelPrimary + `'].orValue('') != ` + celString(primaryID) + ` ||
(
  variables.newLabels.all(k, !k.startsWith('flotilla.dev/') || (k in variables.oldLabels && variables.oldLabels[k] == variables.newLabels[k])) &&
  variables.oldLabels.all(k, !k.startsWith('flotilla.dev/') || k in variables.newLabels) &&
  variables.newAnnotations.all(k, !k.startsWith('flotilla.dev/') || (k in variables.oldAnnotations && variables.oldAnnotations[k] == variables.newAnnotations[k])) &&
  variables.oldAnnotations.all(k, !k.startsWith('flotilla.dev/') || k in variables.newAnnotations)
)`
}

// delegatePolicy is the ValidatingAdmissionPolicy of delegateExpression: matched on everyone
// but the joined identity (and nodes, which do not change metadata), on pod updates; and on pod
// creations, which may not carry this primary's label: a pod made by anyone else with it (and a
// proxy's UID) would be taken for that proxy's delegate.
func delegatePolicy(n Names, meta metav1.ObjectMeta) *admissionregistrationv1.ValidatingAdmissionPolicy {
	failClosed := admissionregistrationv1.Fail
	return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &failClosed,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods", "pods/status"}},
				}}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "not-flotilla", Expression: fmt.Sprintf("request.userInfo.username != '%s'", n.Username())},
				{Name: "not-a-node", Expression: "!('system:nodes' in request.userInfo.groups)"},
			},
			Variables: []admissionregistrationv1.Variable{
				{Name: "newLabels", Expression: "object.metadata.?labels.orValue({})"},
				{Name: "newAnnotations", Expression: "object.metadata.?annotations.orValue({})"},
				{Name: "oldLabels", Expression: "request.operation == 'UPDATE' ? oldObject.metadata.?labels.orValue({}) : {}"},
				{Name: "oldAnnotations", Expression: "request.operation == 'UPDATE' ? oldObject.metadata.?annotations.orValue({}) : {}"},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `request.operation != 'CREATE' || variables.newLabels[?'` + flotillav1.LabelPrimary + `'].orValue('') != ` + celString(n.PrimaryID),
				MessageExpression: `'pod ' + object.metadata.?namespace.orValue('') + '/' + object.metadata.?name.orValue(object.metadata.?generateName.orValue('')) + ' carries ` +
					flotillav1.LabelPrimary + `=' + ` + celString(n.PrimaryID) + ` + ': only Flotilla makes the delegates of that primary'`,
				Reason: ptrTo(metav1.StatusReasonForbidden),
			}, {
				Expression: `request.operation != 'UPDATE' || ` + delegateExpression(n.PrimaryID),
				MessageExpression: `'pod ' + object.metadata.namespace + '/' + object.metadata.name + ' is a delegate of Flotilla primary ' + ` +
					celString(n.PrimaryID) + ` + ': its flotilla.dev/* labels and annotations are changed by Flotilla only'`,
				Reason: ptrTo(metav1.StatusReasonForbidden),
			}},
		}}
}

// podSecurityExpression lets the joined identity change a namespace's Pod Security levels only
// towards stricter ones (privileged < baseline < restricted; a level the API server cannot parse
// counts as restricted, as it enforces it): the levels an admin of the secondary set, or the
// primary asked, are never loosened or removed by the identity, whatever the primary asks.
const podSecurityExpression = `request.resource.resource != 'namespaces' || request.operation != 'UPDATE' ||
['enforce', 'audit', 'warn'].all(m,
  !(('pod-security.kubernetes.io/' + m) in oldObject.metadata.?labels.orValue({})) ||
  {'privileged': 0, 'baseline': 1, 'restricted': 2}[?object.metadata.?labels.orValue({})[?('pod-security.kubernetes.io/' + m)].orValue('privileged')].orValue(2) >=
  {'privileged': 0, 'baseline': 1, 'restricted': 2}[?oldObject.metadata.labels['pod-security.kubernetes.io/' + m]].orValue(2))`

// celString is s as a CEL string literal (a Go quoted string is one: the same escapes).
func celString(s string) string { return strconv.Quote(s) }

// Limits are what a secondary's admin allows a primary there, given at `join`: the namespace
// names it may use (empty: every name the fence does not forbid) and what it may expose.
type Limits struct {
	Namespaces Namespaces
	Exposure   Exposure
	// Pull: the cluster is reached through its agent, whose credential in the primary the
	// manager renews by writing the Secret flotilla-system/flotilla-agent (AgentRole).
	Pull bool
	// Allowance, when set, is the most the primary may use of the secondary: join writes it as
	// the primary's PrimaryAllowance there (its admin edits that object afterwards).
	Allowance corev1.ResourceList
	// Kinds are further resources the primary's Replicators may write there (RESOURCE.GROUP, a
	// custom resource's definition name): granted like the built-in kinds, fenced alike.
	Kinds []schema.GroupResource
	// Definitions lets the primary create and update the CustomResourceDefinitions of Kinds (a
	// Replicator's replicateCRDs), those alone, and only those it created; never delete one.
	Definitions bool
	// ConsumerRole is the ClusterRole the fleet inventory's readers get in the secondary, through
	// a ServiceAccount of their own whose tokens the primary's identity may mint (that one alone):
	// a role of the cluster's admin, or ConsumerRoleMultiKueue. "": the readers reach it as the
	// primary's identity, with its rights and fence.
	ConsumerRole string
}

// ConsumerRoleMultiKueue is the Limits.ConsumerRole that makes the ClusterRole a MultiKueue
// manager needs in a worker cluster (Names.MultiKueueRole) and gives it to the inventory's readers.
const ConsumerRoleMultiKueue = "multikueue"

// MultiKueueRules are what a MultiKueue manager does in a worker: it creates, watches, updates and
// deletes the copies of Workloads and of the Jobs and pods it dispatches there, cluster-wide (it
// watches them by label, in every namespace), and writes the copies' Workload status.
func MultiKueueRules() []rbacv1.PolicyRule {
	all := []string{"create", "update", "patch", "delete", "get", "list", "watch"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: all},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads"}, Verbs: all},
		{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads/status"}, Verbs: []string{"get", "patch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: all},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get"}},
	}
}

// ConsumerObjects are what join makes for the inventory's readers when its admin chose a role
// for them: their ServiceAccount bound to that role (and the role itself, for
// ConsumerRoleMultiKueue). The primary's identity may mint their tokens (its token Role names
// them) and nothing else of theirs.
func ConsumerObjects(n Names, role string) []client.Object {
	ns := flotillav1.SystemNamespace
	labels := map[string]string{"app.kubernetes.io/part-of": "flotilla", flotillav1.LabelPrimary: n.PrimaryID}
	roleName := role
	var objs []client.Object
	if role == ConsumerRoleMultiKueue {
		roleName = n.MultiKueueRole
		objs = append(objs, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: n.MultiKueueRole, Labels: labels}, Rules: MultiKueueRules()})
	}
	return append(objs,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: n.Consumer, Namespace: ns, Labels: labels}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n.Consumer, Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: n.Consumer, Namespace: ns}}})
}

// definitionNames are the names of the CustomResourceDefinitions the primary may write: those of
// the custom kinds allowed, when Definitions is set.
func (l Limits) definitionNames() []string {
	if !l.Definitions {
		return nil
	}
	var out []string
	for _, k := range l.Kinds {
		if k.Group != "" {
			out = append(out, k.String())
		}
	}
	return out
}

// kindGrantsAllowed are the rules of the kinds the admin allowed at join (Kinds, Definitions).
func (l Limits) kindGrantsAllowed() []Grant {
	var out []Grant
	for _, k := range l.Kinds {
		out = append(out, Grant{rbacv1.PolicyRule{APIGroups: []string{k.Group}, Resources: []string{k.Resource},
			Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
			"allowed by this cluster's admin at join (--kinds): a Replicator's objects of this kind (applied, read to judge their health, pruned, listed before a namespace it created is deleted)"})
	}
	if names := l.definitionNames(); len(names) > 0 {
		out = append(out,
			Grant{rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
				Verbs: []string{"get", "update", "patch"}, ResourceNames: names},
				"allowed by this cluster's admin at join (--crds): the definitions of the kinds allowed, copied from the primary (replicateCRDs); never deleted"},
			Grant{rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"create"}},
				"allowed by this cluster's admin at join (--crds): creating a definition (RBAC cannot name what is created; the admission policy admits only the names allowed)"})
	}
	return out
}

// Objects returns everything `join` applies in a secondary for a primary, in apply order
// (the FlotillaPrimary CRD is applied before, from config/crd), fenced by limits.
func Objects(n Names, clusterName string, limits Limits) []client.Object {
	namespaces := limits.Namespaces
	ns := flotillav1.SystemNamespace
	labels := map[string]string{"app.kubernetes.io/part-of": "flotilla", flotillav1.LabelPrimary: n.PrimaryID}
	meta := func(name, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}
	}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: n.ServiceAccount, Namespace: ns}
	// The identity renews its own tokens, and mints the inventory readers' when they have one.
	tokensOf := []string{n.ServiceAccount}
	if limits.ConsumerRole != "" {
		tokensOf = append(tokensOf, n.Consumer)
	}
	failClosed := admissionregistrationv1.Fail
	id := celString(n.PrimaryID)
	var allowList []admissionregistrationv1.Validation
	if len(namespaces) > 0 { // first: its refusal names the list
		allowList = append(allowList, admissionregistrationv1.Validation{
			Expression:        allowListExpression(namespaces),
			MessageExpression: allowListMessage(n.PrimaryID, namespaces),
			Reason:            ptrTo(metav1.StatusReasonForbidden),
		})
	}
	allowList = append(allowList, admissionregistrationv1.Validation{
		Expression: snippetsExpression,
		MessageExpression: `'Flotilla (primary ' + ` + id + ` + ') may not write an Ingress with a snippet annotation (raw ingress controller configuration): ingress ' + ` +
			`request.namespace + '/' + request.name + ' refused'`,
		Reason: ptrTo(metav1.StatusReasonForbidden),
	})
	if hosts := limits.Exposure.IngressHosts; len(hosts) > 0 {
		allowList = append(allowList, admissionregistrationv1.Validation{
			Expression: hostsExpression(hosts),
			MessageExpression: `'Flotilla (primary ' + ` + id + ` + ') may expose in this cluster only the Ingress hosts join allowed (' + ` +
				celString(strings.Join(hosts, ", ")) + ` + '): ingress ' + request.namespace + '/' + request.name + ' refused; an admin of this cluster may allow more with flotillactl cluster join --ingress-hosts'`,
			Reason: ptrTo(metav1.StatusReasonForbidden),
		})
	}
	if types := limits.Exposure.ServiceTypes; len(types) > 0 || len(limits.Exposure.IngressHosts) > 0 {
		// With a list of hosts and none of types, only ClusterIP: an admin who limits hosts limits
		// what is exposed.
		allowList = append(allowList, admissionregistrationv1.Validation{
			Expression: serviceTypesExpression(types),
			MessageExpression: `'Flotilla (primary ' + ` + id + ` + ') may create in this cluster only Services of type ClusterIP or a type join allowed: service ' + ` +
				`request.namespace + '/' + request.name + ' of type ' + object.spec.?type.orValue('ClusterIP') + ' refused; an admin of this cluster may allow it with flotillactl cluster join --service-types'`,
			Reason: ptrTo(metav1.StatusReasonForbidden),
		})
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: meta(ns, "")},
		&corev1.ServiceAccount{ObjectMeta: meta(n.ServiceAccount, ns)},
		&rbacv1.ClusterRole{ObjectMeta: meta(n.ClusterRole, ""), Rules: append(Rules(n.PrimaryID), rulesOf(limits.kindGrantsAllowed())...)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: meta(n.ClusterRole, ""),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: n.ClusterRole},
			Subjects: []rbacv1.Subject{sa}},
		&rbacv1.Role{ObjectMeta: meta(n.TokenRole, ns), Rules: []rbacv1.PolicyRule{{APIGroups: []string{""},
			Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: tokensOf}}},
		&rbacv1.RoleBinding{ObjectMeta: meta(n.TokenRole, ns),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: n.TokenRole},
			Subjects: []rbacv1.Subject{sa}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: meta(n.Policy, ""),
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: &failClosed,
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update,
							admissionregistrationv1.Delete, admissionregistrationv1.Connect},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"},
							Resources: []string{"*", "pods/exec", "pods/attach", "pods/portforward", "pods/status", "pods/ephemeralcontainers", "pods/resize",
								"serviceexports/status", "serviceimports/status"}},
					}}}},
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "flotilla-identity",
					Expression: fmt.Sprintf("request.userInfo.username == '%s'", n.Username())}},
				Validations: append(allowList, admissionregistrationv1.Validation{
					Expression: policyExpression(n.PrimaryID, limits.definitionNames()),
					MessageExpression: `'Flotilla (primary ' + ` + id + ` + ') may write only in namespaces labelled ` +
						flotillav1.LabelManagedBy + `=' + ` + id + ` + ', never in kube-*, default or flotilla-system, and may change only objects labelled ` +
						flotillav1.LabelPrimary + `=' + ` + id + ` + ': ' + ` +
						`request.resource.resource + ' ' + (request.namespace != '' ? request.namespace + '/' : '') + request.name + ' refused'`,
					Reason: ptrTo(metav1.StatusReasonForbidden),
				}, admissionregistrationv1.Validation{
					Expression: mcsShapeExpression(),
					MessageExpression: `'Flotilla (primary ' + ` + id + ` + ') writes EndpointSlices only for its ` + mcs.DerivedServicePrefix +
						`* Services, and those only of type ClusterIP without selector: ' + request.resource.resource + ' ' + request.namespace + '/' + request.name + ' refused'`,
					Reason: ptrTo(metav1.StatusReasonForbidden),
				}, admissionregistrationv1.Validation{
					Expression: allowanceLabelExpression,
					MessageExpression: `'Flotilla (primary ' + ` + id + ` + ') may not set or change the label ` + flotillav1.LabelAllowance +
						` of namespace ' + request.name + ': this cluster\'s lender sets it once the namespace\'s quota is in force'`,
					Reason: ptrTo(metav1.StatusReasonForbidden),
				}, admissionregistrationv1.Validation{
					Expression:        podSecurityExpression,
					MessageExpression: `'Flotilla (primary ' + ` + id + `+ ') may only tighten the Pod Security levels of namespace ' + request.name + ', never loosen or remove one'`,
					Reason:            ptrTo(metav1.StatusReasonForbidden),
				}),
			}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta(n.Policy, ""),
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        n.Policy,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			}},
		delegatePolicy(n, meta(n.DelegatePolicy, "")),
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta(n.DelegatePolicy, ""),
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        n.DelegatePolicy,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			}},
		allowancePolicy(n, meta(n.AllowancePolicy, "")),
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta(n.AllowancePolicy, ""),
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: n.AllowancePolicy,
				// No PrimaryAllowance, no limit: the policy admits everything.
				ParamRef: &admissionregistrationv1.ParamRef{Name: n.PrimaryID,
					ParameterNotFoundAction: ptrTo(admissionregistrationv1.AllowAction)},
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			}},
		&flotillav1.FlotillaPrimary{ObjectMeta: metav1.ObjectMeta{Name: n.PrimaryID, Labels: labels},
			Spec: flotillav1.FlotillaPrimarySpec{ClusterName: clusterName, ServiceAccount: ns + "/" + n.ServiceAccount}},
	}
	if limits.Allowance != nil {
		objs = append(objs, &flotillav1.PrimaryAllowance{ObjectMeta: metav1.ObjectMeta{Name: n.PrimaryID, Labels: labels},
			Spec: flotillav1.PrimaryAllowanceSpec{Hard: limits.Allowance}})
	}
	if limits.Pull {
		objs = append(objs, AgentObjects(n)...)
	}
	if limits.ConsumerRole != "" {
		objs = append(objs, ConsumerObjects(n, limits.ConsumerRole)...)
	}
	return objs
}

// AgentObjects are what a cluster in pull mode grants besides: the manager may replace the
// agent's credential in the Secret flotilla-system/flotilla-agent, that Secret alone, and never
// read it (the admission policy lets that one write through the fence).
func AgentObjects(n Names) []client.Object {
	ns := flotillav1.SystemNamespace
	meta := metav1.ObjectMeta{Name: n.AgentRole, Namespace: ns,
		Labels: map[string]string{"app.kubernetes.io/part-of": "flotilla", flotillav1.LabelPrimary: n.PrimaryID}}
	return []client.Object{
		&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""},
			Resources: []string{"secrets"}, Verbs: []string{"update", "patch"}, ResourceNames: []string{flotillav1.AgentSecretName}}}},
		&rbacv1.RoleBinding{ObjectMeta: meta,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: n.AgentRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: n.ServiceAccount, Namespace: ns}}},
	}
}

// allowanceLabelExpression keeps a namespace's flotilla.dev/allowance label the lender's: the
// identity may neither set it on a namespace it creates nor change it on one it updates.
var allowanceLabelExpression = `request.resource.group != '' || request.resource.resource != 'namespaces' || request.operation == 'DELETE' ||
  object.metadata.?labels[?'` + flotillav1.LabelAllowance + `'].orValue('') ==
    (request.operation == 'UPDATE' ? oldObject.metadata.?labels[?'` + flotillav1.LabelAllowance + `'].orValue('') : '')`

// allowancePolicy admits the identity's new workloads (pods, and the controllers that make
// pods) only in a namespace the lender has labelled flotilla.dev/allowance=<primary>, its quota
// in force, while the primary's PrimaryAllowance (the binding's parameter) exists: without it, a
// namespace the primary just created would hold pods no quota counts yet. Only the primary's own
// managed namespaces are matched.
//
// It fails open: an API server that has just started cannot resolve the parameter's kind for a
// moment ("failed to configure policy"), and failing closed then refused every delegate of every
// primary as invalid. The quotas hold the cap wherever the lender put them; only a namespace the
// primary creates in that moment may hold pods before its quota does.
func allowancePolicy(n Names, meta metav1.ObjectMeta) *admissionregistrationv1.ValidatingAdmissionPolicy {
	failOpen := admissionregistrationv1.Ignore
	id := celString(n.PrimaryID)
	rule := func(group string, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources}}}
	}
	return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &failOpen,
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: flotillav1.GroupVersion.String(), Kind: "PrimaryAllowance"},
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{flotillav1.LabelManagedBy: n.PrimaryID}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
					rule("", "pods"), rule("apps", "deployments", "statefulsets", "replicasets", "daemonsets"), rule("batch", "jobs", "cronjobs")}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "flotilla-identity",
				Expression: fmt.Sprintf("request.userInfo.username == '%s'", n.Username())}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `namespaceObject != null && namespaceObject.metadata.?labels[?'` + flotillav1.LabelAllowance + `'].orValue('') == ` + id,
				MessageExpression: `'this cluster lends Flotilla (primary ' + ` + id + ` + ') part of itself (PrimaryAllowance ' + ` + id +
					` + '): its lender has not yet put the quota of namespace ' + request.namespace + ' in force; ' + request.resource.resource + ' refused for now'`,
				Reason: ptrTo(metav1.StatusReasonForbidden),
			}},
		}}
}

func ptrTo[T any](v T) *T { return &v }
