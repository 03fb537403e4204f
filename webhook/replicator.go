package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// ReplicatorPath is where Replicators are checked against their author's rights.
const ReplicatorPath = "/validate-flotilla-dev-v1alpha1-replicator"

// Right is one thing a Replicator does in the primary on its author's behalf: a verb on a resource
// in a namespace ("" for a cluster-scoped resource), optionally on one named object.
type Right struct {
	Verb, Group, Resource, Namespace, Name string
}

// String reads as RBAC names it: "create deployments.apps in namespace x".
func (r Right) String() string {
	res := r.Resource
	if r.Group != "" {
		res += "." + r.Group
	}
	if r.Name != "" {
		res += " " + r.Name
	}
	if r.Namespace == "" {
		return r.Verb + " " + res
	}
	return r.Verb + " " + res + " in namespace " + r.Namespace
}

// writeVerbs are what the Replicator does to each object it owns: server-side apply (create for
// a new object, patch for an existing one) and delete (pruning, and its own deletion).
var writeVerbs = []string{"create", "patch", "delete"}

// ReplicatorRights lists, in a stable order and each once, the rights a Replicator's author must
// hold for the Replicator to do what it does in the primary: write each kind it carries in its
// replication namespace, create that namespace when it does not exist yet, and use a
// ClusterIssuer it names (cert-manager's own approval right). The author's rights in the
// primary's namespace stand for the secondaries too, where the joined identity's fence and the
// namespace opt-in bound the rest. mapper finds the resource of a kind of resources without
// special handling (any kind the primary serves). An error is a spec no right can cover.
func ReplicatorRights(spec *flotillav1.ReplicatorSpec, namespaceExists bool, mapper meta.RESTMapper) ([]Right, error) {
	ns := spec.ReplicationNamespace
	kinds, err := replicatedKinds(spec, mapper)
	if err != nil {
		return nil, err
	}
	var out []Right
	if !namespaceExists {
		out = append(out, Right{Verb: "create", Resource: "namespaces", Name: ns})
	}
	seen := map[schema.GroupResource]bool{}
	for _, k := range kinds {
		gr := k.GroupResource()
		if seen[gr] {
			continue
		}
		seen[gr] = true
		for _, v := range writeVerbs {
			out = append(out, Right{Verb: v, Group: gr.Group, Resource: gr.Resource, Namespace: ns})
		}
	}
	if ref := issuerRef(spec); ref != nil && ref.Kind == "ClusterIssuer" {
		// cert-manager's RBAC for who may have a request signed by an issuer: verb use on signers,
		// named <kind plural>.<group>/<name>. A ClusterIssuer is shared by every namespace and may
		// vouch for any host; a namespaced Issuer of the replication namespace is the author's own.
		group := ref.Group
		if group == "" {
			group = "cert-manager.io"
		}
		out = append(out, Right{Verb: "use", Group: "cert-manager.io", Resource: "signers", Name: "clusterissuers." + group + "/" + ref.Name})
	}
	return out, nil
}

// replicatedKinds lists the kinds a Replicator writes, in its apply order: plumber's fields'
// kinds, then each manifest's, as the primary serves it (its resource, found by mapper; the
// rights checked are that resource's, so a manifest naming another group's kind of the same name
// is checked as that kind). A kind the primary does not serve, or serves cluster-scoped, is an
// error.
func replicatedKinds(spec *flotillav1.ReplicatorSpec, mapper meta.RESTMapper) ([]flotillav1.ReplicatedKind, error) {
	var names []string
	if spec.ConfigMapName != "" {
		names = append(names, "ConfigMap")
	}
	if spec.IngressSecureEnabled {
		names = append(names, "Secret") // ca-secret, cli-secret
		if spec.TLS != nil && spec.TLS.IssuerRef != nil {
			names = append(names, "Certificate")
		}
	}
	if spec.DeploymentName != "" && spec.DeploymentSpec != nil {
		names = append(names, "Deployment")
	}
	if spec.ServiceName != "" {
		names = append(names, "Service")
	}
	if spec.IngressName != "" && spec.IngressSpec != nil {
		names = append(names, "Ingress")
	}
	kinds := make([]flotillav1.ReplicatedKind, 0, len(names)+len(spec.Resources))
	for _, n := range names {
		k, _ := flotillav1.ReplicatedKindOf(n)
		kinds = append(kinds, k)
	}
	for i, m := range spec.Resources {
		gv, err := schema.ParseGroupVersion(m.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("resources[%d]: apiVersion %q: %w", i, m.APIVersion, err)
		}
		gvk := gv.WithKind(m.Kind)
		if flotillav1.FlotillaGroup(gvk.Group) {
			return nil, fmt.Errorf("resources[%d]: a Replicator does not carry Flotilla's own kinds (%s)", i, m.APIVersion)
		}
		if k, ok := flotillav1.SpecialKind(gvk.GroupKind()); ok {
			kinds = append(kinds, k)
			continue
		}
		if mapper == nil {
			return nil, fmt.Errorf("resources[%d]: kind %s (%s) cannot be looked up", i, m.Kind, m.APIVersion)
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case meta.IsNoMatchError(err):
			return nil, fmt.Errorf("resources[%d]: kind %s (%s) is not served by the primary: install its CustomResourceDefinition there first", i, m.Kind, m.APIVersion)
		case err != nil:
			return nil, fmt.Errorf("resources[%d]: finding kind %s (%s): %w", i, m.Kind, m.APIVersion, err)
		case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
			return nil, fmt.Errorf("resources[%d]: kind %s (%s) is cluster-scoped: a Replicator's resources are objects of its replicationNamespace", i, m.Kind, m.APIVersion)
		}
		kinds = append(kinds, flotillav1.KindFor(gvk, mapping.Resource.Resource, true))
	}
	return kinds, nil
}

func issuerRef(spec *flotillav1.ReplicatorSpec) *flotillav1.IssuerRef {
	if !spec.IngressSecureEnabled || spec.TLS == nil {
		return nil
	}
	return spec.TLS.IssuerRef
}

// ReplicatorHandler refuses a Replicator (at CREATE, and at UPDATE when its spec changes) that
// would make the manager write what the requesting user may not: one SubjectAccessReview per right
// (ReplicatorRights), as that user, with their groups, UID and extra. Without it a user who may
// create Replicators would write, with the manager's rights, into any namespace of the primary and
// of every secondary.
type ReplicatorHandler struct {
	Decoder admission.Decoder
	// Reviews creates the SubjectAccessReviews (the API server answers them).
	Reviews client.Writer
	// Mapper finds the resource and scope of a kind of resources without special handling (the
	// primary's discovery).
	Mapper meta.RESTMapper
	// Namespaces reads whether the replication namespace exists (uncached: a namespace made a
	// moment ago must count, and a missing one means the author must be able to create it).
	Namespaces client.Reader
	// Clusters resolves target names to the registered clusters, and Tenancy says which of them
	// the replication namespace may not use (its ClusterSetBindings). Either nil: targets are
	// not checked here (the controller still leaves a denied one out).
	Clusters interface{ Snapshots() []clusters.Snapshot }
	Tenancy  interface {
		Denied(ctx context.Context, namespace string) (map[string]string, error)
	}
}

var _ admission.Handler = (*ReplicatorHandler)(nil)

// mostNamed bounds how many missing rights a denial lists.
const mostNamed = 3

// Handle allows the Replicator or denies it naming the rights its author lacks.
func (h *ReplicatorHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	rep := &flotillav1.Replicator{}
	if err := h.Decoder.Decode(req, rep); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		old := &flotillav1.Replicator{}
		if err := h.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		// The manager's own updates (finalizer) and metadata edits change nothing it writes.
		if apiequality.Semantic.DeepEqual(old.Spec, rep.Spec) {
			return admission.Allowed("spec unchanged")
		}
	}
	if rep.Spec.ReplicationNamespace == "" {
		// The schema requires it and refuses the object after this webhook, with its own message.
		return admission.Allowed("left to the schema")
	}
	if denied, err := h.deniedTargets(ctx, rep); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	} else if denied != "" {
		log.FromContext(ctx).Info("Replicator refused: a target outside its cluster sets", "name", rep.Name, "user", req.UserInfo.Username)
		return admission.Denied(denied)
	}
	exists, err := h.namespaceExists(ctx, rep.Spec.ReplicationNamespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	rights, err := ReplicatorRights(&rep.Spec, exists, h.Mapper)
	if err != nil {
		return admission.Denied(fmt.Sprintf("Replicator %s: %v", rep.Name, err))
	}
	missing, err := h.missing(ctx, req.UserInfo, rights)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(missing) == 0 {
		return admission.Allowed("")
	}
	msg := DenialMessage(rep.Name, req.UserInfo.Username, missing)
	log.FromContext(ctx).Info("Replicator refused", "name", rep.Name, "user", req.UserInfo.Username, "missing", len(missing))
	return admission.Denied(msg)
}

// deniedTargets says which clusters targetCluster names that the replication namespace may not
// use, "" when none ("*" means every cluster it may use, and never names one).
func (h *ReplicatorHandler) deniedTargets(ctx context.Context, rep *flotillav1.Replicator) (string, error) {
	if h.Clusters == nil || h.Tenancy == nil {
		return "", nil
	}
	res := clusters.Resolve(rep.Spec.TargetCluster, h.Clusters.Snapshots())
	if res.Every || len(res.Clusters) == 0 {
		return "", nil
	}
	denied, err := h.Tenancy.Denied(ctx, rep.Spec.ReplicationNamespace)
	if err != nil {
		return "", fmt.Errorf("reading the cluster sets of namespace %s: %w", rep.Spec.ReplicationNamespace, err)
	}
	if res = res.Deny(denied); len(res.Denied) == 0 {
		return "", nil
	}
	return fmt.Sprintf("Replicator %s: targetCluster names cluster(s) its replicationNamespace may not use: %s", rep.Name, strings.Join(res.Denied, "; ")), nil
}

// DenialMessage names the user and the first missing rights.
func DenialMessage(replicator, user string, missing []Right) string {
	return fmt.Sprintf("Replicator %s: user %q may not %s; a Replicator writes only what its author may write (the manager's rights are not lent)",
		replicator, user, namedRights(missing))
}

// namedRights names the first mostNamed rights, and how many more.
func namedRights(missing []Right) string {
	names := make([]string, 0, mostNamed)
	for i, r := range missing {
		if i == mostNamed {
			break
		}
		names = append(names, r.String())
	}
	more := ""
	if len(missing) > mostNamed {
		more = fmt.Sprintf(" (and %d more)", len(missing)-mostNamed)
	}
	return strings.Join(names, "; nor ") + more
}

func (h *ReplicatorHandler) namespaceExists(ctx context.Context, name string) (bool, error) {
	err := h.Namespaces.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("reading namespace %s: %w", name, err)
	}
}

// missing asks the API server, for each right, whether the user holds it.
func (h *ReplicatorHandler) missing(ctx context.Context, user authenticationv1.UserInfo, rights []Right) ([]Right, error) {
	return missingRights(ctx, h.Reviews, user, rights)
}

// missingRights asks the API server, for each right, whether the user holds it (one
// SubjectAccessReview each, as that user, with their groups, UID and extra).
func missingRights(ctx context.Context, reviews client.Writer, user authenticationv1.UserInfo, rights []Right) ([]Right, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	var out []Right
	for _, r := range rights {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: r.Namespace, Verb: r.Verb, Group: r.Group,
				Resource: r.Resource, Name: r.Name},
		}}
		if err := reviews.Create(ctx, sar); err != nil {
			return nil, fmt.Errorf("asking whether %s may %s: %w", user.Username, r, err)
		}
		if !sar.Status.Allowed {
			out = append(out, r)
		}
	}
	return out, nil
}
