package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/internal/installnames"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// severity ranks a doctor finding; only severityError makes doctor exit non-zero.
type severity string

const (
	severityOK      severity = "OK"
	severityInfo    severity = "INFO"
	severityWarning severity = "WARN"
	severityError   severity = "ERROR"
)

// The checks doctor runs, as named in its findings.
const (
	checkVirtualNodes = "virtual-nodes"
	checkDaemonSets   = "daemonsets"
	checkProxies      = "proxies"
	checkDelegates    = "delegates"
	checkWebhook      = "webhook"
	checkClusters     = "clusters"
	checkClaims       = "claims"
)

// finding is one line of doctor's report.
type finding struct {
	Severity severity `json:"severity"`
	Check    string   `json:"check"`
	Message  string   `json:"message"`
	// Object is namespace/name (or name) of what the finding is about, when it is about one object.
	Object string `json:"object,omitempty"`
	// Nodes are the virtual nodes a DaemonSet can reach.
	Nodes []string `json:"nodes,omitempty"`
	// Cluster is the secondary a delegates finding is about.
	Cluster string `json:"cluster,omitempty"`
	// Fix is how to repair it; the text output prints each distinct fix once, after the findings.
	Fix string `json:"fix,omitempty"`
}

// errDoctorFound makes the process exit non-zero when a finding is an error.
var errDoctorFound = errors.New("flotillactl doctor found errors")

// primaryClient connects to the primary named by the global flags.
func (g *GlobalOptions) primaryClient() (client.Client, error) {
	user, err := g.userConfig()
	if err != nil {
		return nil, err
	}
	c, _, err := clientFor(user, g.primaryContext())
	return c, err
}

// defaultSecondaryTimeout bounds all of doctor's calls to one secondary: one that does not answer
// costs doctor that long, never a hang.
const defaultSecondaryTimeout = 10 * time.Second

// kubeContexts are the contexts of the user's kubeconfig and a way to reach one of them.
type kubeContexts struct {
	names []string
	// connect builds a client for a context whose every request ends within timeout.
	connect func(context string, timeout time.Duration) (client.Client, error)
}

// userContexts loads the user's kubeconfig, with which doctor reaches the secondaries.
func (g *GlobalOptions) userContexts() (kubeContexts, error) {
	user, err := g.userConfig()
	if err != nil {
		return kubeContexts{}, err
	}
	connect := func(name string, timeout time.Duration) (client.Client, error) {
		rc, err := restConfigFor(user, name)
		if err != nil {
			return nil, err
		}
		// The caller's context bounds its own calls; this also bounds those that carry none
		// (the client's lazy discovery of resources).
		rc.Timeout = timeout
		c, err := client.New(rc, client.Options{Scheme: cliScheme})
		if err != nil {
			return nil, fmt.Errorf("connecting to context %q: %w", name, err)
		}
		return c, nil
	}
	return kubeContexts{names: slices.Sorted(maps.Keys(user.Contexts)), connect: connect}, nil
}

// doctorDeps are how doctor reaches the clusters; tests pass fakes.
type doctorDeps struct {
	// primary connects to the primary.
	primary func() (client.Client, error)
	// contexts loads the user's kubeconfig contexts, through which doctor reaches the secondaries.
	contexts func() (kubeContexts, error)
	// secondaryTimeout bounds the calls to each secondary (default defaultSecondaryTimeout).
	secondaryTimeout time.Duration
}

// secondaryAccess is how the delegates check reaches the secondaries: with the user's own
// kubeconfig, never with the manager's credentials, so doctor needs no access to the registration
// Secret and sees what the user may see.
type secondaryAccess struct {
	contexts func() (kubeContexts, error)
	// overrides maps a cluster to the user's context for it (--secondary-context).
	overrides map[string]string
	timeout   time.Duration
}

// newDoctorCommand builds `doctor`; deps are how it reaches the clusters.
func newDoctorCommand(deps doctorDeps) *cobra.Command {
	var output string
	var secondaryContexts []string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the primary and its secondaries for problems with Flotilla (read-only)",
		Long: `doctor reads the primary and the secondaries (it never writes to them) and prints one line
per finding, then a summary. It checks:

  daemonsets     DaemonSets, in every namespace, whose pods the DaemonSet controller would place on
                 a virtual node, judged as the controller does: the template's node name, its
                 nodeSelector and required node affinity against the node's labels, and its
                 tolerations (plus those the controller adds) against the node's NoSchedule and
                 NoExecute taints. Such pods never run, so the DaemonSet never becomes available
                 and its rolling updates stall. Flotilla's webhook adds the exclusion to
                 DaemonSets created or changed while the manager runs; older ones may lack it.
                 WARN, with the fix (a required node-affinity term type NotIn [virtual-kubelet]).
  virtual-nodes  The virtual nodes (type=virtual-kubelet with flotilla.dev/cluster): their count
                 and names (OK), and each one that is not Ready (WARN).
  proxies        Proxy pods (flotilla.dev/proxy=true) that are Pending, with their reason: WARN
                 while no virtual node is chosen, INFO while bound and waiting for the delegate.
  delegates      Each secondary's delegates against the proxies bound to its virtual node: a
                 Running proxy whose secondary holds no delegate of it (ERROR), a delegate of this
                 primary whose proxy is gone (WARN), or one delegate per proxy (OK). doctor reads
                 the secondaries with your kubeconfig, never the manager's credentials: the
                 context named like the cluster (or the one its name was derived from), or the
                 one --secondary-context CLUSTER=CONTEXT names. A cluster with no such context is
                 not checked (INFO); one whose context fails, does not answer within ` + defaultSecondaryTimeout.String() + `, or
                 reaches another cluster than the one registered is not checked (WARN).
  claims         With the delegates check, each secondary's real claims against the primary's
                 claims of class flotilla whose data it holds: a claim decided for it over a
                 minute ago without a real claim there (ERROR), a real claim of this primary whose
                 claim is gone from the primary (WARN: its data is kept), or one per claim (OK).
  clusters       Each registered cluster the manager refuses to use, as its ClusterDetector says:
                 a context of the registration Secret with a field it refuses (InvalidContext:
                 exec, auth-provider, tokenFile, file paths, impersonation, proxy-url...), or a
                 cluster that answers with another identity than the one pinned for it
                 (IdentityChanged: join it again to accept it). ERROR, with the reason. And the
                 tunnel of each cluster in pull mode: up, with its round trip and reconnects (OK),
                 or held by no agent, since when and why (WARN).
  webhook        The manager's MutatingWebhookConfiguration (` + flotillav1.WebhookConfigurationName + `, or the name the chart's
                 fullnameOverride gave it, as the manager's Deployment says): without it, elected
                 pods run in the primary and DaemonSets are not kept off virtual nodes (ERROR).

A check the API server does not let doctor read in the primary is an ERROR. doctor exits
non-zero when any finding is an ERROR.`,
		Example: "  flotillactl doctor\n  flotillactl doctor -o json\n  flotillactl doctor -o yaml\n  flotillactl doctor --secondary-context eu=gke_prod_europe-west1_eu",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "json", "yaml"); err != nil {
				return err
			}
			overrides, err := parseSecondaryContexts(secondaryContexts)
			if err != nil {
				return err
			}
			c, err := deps.primary()
			if err != nil {
				return err
			}
			sec := secondaryAccess{contexts: deps.contexts, overrides: overrides, timeout: deps.secondaryTimeout}
			if sec.timeout == 0 {
				sec.timeout = defaultSecondaryTimeout
			}
			return runDoctor(cmd.Context(), c, sec, output, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (the findings and the summary as one document)")
	cmd.Flags().StringArrayVar(&secondaryContexts, "secondary-context", nil,
		"read cluster CLUSTER's delegates with kubeconfig context CONTEXT, given as `CLUSTER=CONTEXT` (repeatable; default: the context named CLUSTER)")
	return cmd
}

// parseSecondaryContexts reads the --secondary-context flags into cluster → context.
func parseSecondaryContexts(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range flags {
		// Split at the first '=': a cluster name has none, a context name may.
		cluster, contextName, ok := strings.Cut(f, "=")
		if !ok || cluster == "" || contextName == "" {
			return nil, fmt.Errorf("--secondary-context %q: want CLUSTER=CONTEXT", f)
		}
		if have, dup := out[cluster]; dup && have != contextName {
			return nil, fmt.Errorf("--secondary-context: cluster %s is given two contexts, %s and %s", cluster, have, contextName)
		}
		out[cluster] = contextName
	}
	return out, nil
}

// runDoctor runs every check, prints the report and fails when it has errors.
func runDoctor(ctx context.Context, c client.Client, sec secondaryAccess, output string, out io.Writer) error {
	findings := diagnose(ctx, c, sec)
	var err error
	if output != "" {
		err = printDocument(out, output, doctorReport{Findings: emptyIfNil(findings), Summary: countSeverity(findings)})
	} else {
		err = printDoctorText(out, findings)
	}
	if err != nil {
		return fmt.Errorf("printing the report: %w", err)
	}
	if n := countSeverity(findings)[severityError]; n > 0 {
		return fmt.Errorf("%w: %s", errDoctorFound, plural(n, "error"))
	}
	return nil
}

// diagnose runs the checks. One that cannot read what it needs becomes an error finding, so the
// others still report: a doctor that stops at the first forbidden list hides the rest.
func diagnose(ctx context.Context, c client.Client, sec secondaryAccess) []finding {
	var all []finding
	add := func(check string, fs []finding, err error) {
		all = append(all, fs...)
		if err != nil {
			all = append(all, finding{Severity: severityError, Check: check, Message: err.Error()})
		}
	}
	fs, err := clusterFindings(ctx, c)
	add(checkClusters, fs, err)
	nodes, nodesErr := listVirtualNodes(ctx, c)
	if nodesErr != nil {
		add(checkVirtualNodes, nil, nodesErr)
	} else {
		add(checkVirtualNodes, virtualNodeFindings(nodes), nil)
		fs, err := daemonSetFindings(ctx, c, nodes)
		add(checkDaemonSets, fs, err)
	}
	fs, err = proxyFindings(ctx, c)
	add(checkProxies, fs, err)
	if nodesErr == nil {
		fs, err = delegatesCheck(ctx, c, nodes, sec)
		add(checkDelegates, fs, err)
	}
	fs, err = webhookFindings(ctx, c)
	add(checkWebhook, fs, err)
	return all
}

// unusedClusterReasons are the ClusterDetector reasons of a registered cluster the manager
// refuses to use until someone acts: doctor reports each as an error.
var unusedClusterReasons = map[string]bool{
	flotillav1.ReasonInvalidContext:  true,
	flotillav1.ReasonIdentityChanged: true,
}

// clusterFindings reports each registered cluster the manager refuses to use, with the reason and
// message of its ClusterDetector (which name the refused fields, never their values). doctor
// reads the ClusterDetectors rather than the registration Secret: it needs no right to read
// Secrets, and shows what the manager decided.
func clusterFindings(ctx context.Context, c client.Client) ([]finding, error) {
	var list flotillav1.ClusterDetectorList
	if err := c.List(ctx, &list, client.InNamespace(flotillav1.SystemNamespace)); err != nil {
		return nil, fmt.Errorf("listing ClusterDetectors: %w", err)
	}
	var out []finding
	for i := range list.Items {
		cd := &list.Items[i]
		if f, ok := tunnelFinding(cd); ok {
			out = append(out, f)
		}
		if !unusedClusterReasons[cd.Status.Reason] {
			continue
		}
		out = append(out, finding{Severity: severityError, Check: checkClusters, Cluster: cd.Name,
			Object:  flotillav1.SystemNamespace + "/" + cd.Name,
			Message: fmt.Sprintf("cluster %s is not used: %s: %s", cd.Name, cd.Status.Reason, cd.Status.Message)})
	}
	return out, nil
}

// tunnelFinding reports the tunnel of a cluster in pull mode: up, with its round trip and
// reconnects, or down, with why it last ended; nothing for a dialled cluster.
func tunnelFinding(cd *flotillav1.ClusterDetector) (finding, bool) {
	if cd.Status.Mode != flotillav1.ModePull {
		return finding{}, false
	}
	f := finding{Check: checkClusters, Cluster: cd.Name, Object: flotillav1.SystemNamespace + "/" + cd.Name}
	t := cd.Status.Tunnel
	if t == nil || !t.Connected {
		since, why := "", ""
		if t != nil && t.Since != nil {
			since = " since " + t.Since.UTC().Format(time.RFC3339)
		}
		if t != nil && t.LastError != "" {
			why = ": " + t.LastError
		}
		f.Severity = severityWarning
		f.Message = fmt.Sprintf("cluster %s is in pull mode and its agent holds no tunnel%s%s", cd.Name, since, why)
		f.Fix = "In a cluster in pull mode, check its agent: kubectl --context <its context> -n " + flotillav1.SystemNamespace +
			" logs deploy/flotilla-agent; it must reach the primary's tunnel endpoint and hold a valid credential (docs/pull-mode.md)."
		return f, true
	}
	parts := []string{"pull mode, tunnel up"}
	if t.Since != nil {
		parts[0] += " since " + t.Since.UTC().Format(time.RFC3339)
	}
	if t.RoundTrip != nil {
		parts = append(parts, "round trip "+t.RoundTrip.Duration.String())
	}
	if t.Connects > 1 {
		parts = append(parts, plural(int(t.Connects)-1, "reconnect"))
	}
	f.Severity = severityOK
	f.Message = fmt.Sprintf("cluster %s: %s", cd.Name, strings.Join(parts, ", "))
	return f, true
}

// listVirtualNodes lists Flotilla's virtual nodes, by name.
func listVirtualNodes(ctx context.Context, c client.Client) ([]corev1.Node, error) {
	var list corev1.NodeList
	err := c.List(ctx, &list, client.MatchingLabels{flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet},
		client.HasLabels{flotillav1.LabelCluster})
	if err != nil {
		return nil, fmt.Errorf("listing virtual nodes: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// virtualNodeFindings names the virtual nodes and warns about each one that is not Ready.
func virtualNodeFindings(nodes []corev1.Node) []finding {
	if len(nodes) == 0 {
		return []finding{{Severity: severityInfo, Check: checkVirtualNodes,
			Message: "no virtual nodes: no secondary is registered and usable (see flotillactl cluster list)"}}
	}
	names := make([]string, 0, len(nodes))
	var notReady []finding
	for i := range nodes {
		names = append(names, nodes[i].Name)
		if why, ready := nodeReadiness(&nodes[i]); !ready {
			notReady = append(notReady, finding{Severity: severityWarning, Check: checkVirtualNodes, Object: nodes[i].Name,
				Message: fmt.Sprintf("virtual node %s is not Ready: %s", nodes[i].Name, why)})
		}
	}
	ok := finding{Severity: severityOK, Check: checkVirtualNodes, Message: fmt.Sprintf("%s (%d Ready): %s",
		plural(len(nodes), "virtual node"), len(nodes)-len(notReady), strings.Join(names, ", "))}
	return append([]finding{ok}, notReady...)
}

// nodeReadiness says whether a node is Ready and, when not, why.
func nodeReadiness(n *corev1.Node) (string, bool) {
	for _, cond := range n.Status.Conditions {
		if cond.Type != corev1.NodeReady {
			continue
		}
		why := joinNonEmpty(": ", fmt.Sprintf("Ready=%s", cond.Status), cond.Reason, cond.Message)
		if cond.Status == corev1.ConditionUnknown {
			// The manager renews the virtual nodes' Leases; Unknown means nobody did for a while.
			why += " (is the manager running?)"
		}
		return why, cond.Status == corev1.ConditionTrue
	}
	return "no Ready condition yet", false
}

// daemonSetFindings warns about each DaemonSet that can reach a virtual node.
func daemonSetFindings(ctx context.Context, c client.Client, nodes []corev1.Node) ([]finding, error) {
	var list appsv1.DaemonSetList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing DaemonSets: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].Namespace+"/"+list.Items[i].Name < list.Items[j].Namespace+"/"+list.Items[j].Name
	})
	var out []finding
	for i := range list.Items {
		ds := &list.Items[i]
		var targets []string
		for j := range nodes {
			if canTargetNode(ds, &nodes[j]) {
				targets = append(targets, nodes[j].Name)
			}
		}
		if len(targets) > 0 {
			key := ds.Namespace + "/" + ds.Name
			out = append(out, finding{Severity: severityWarning, Check: checkDaemonSets, Object: key, Nodes: targets,
				Message: fmt.Sprintf("daemonset %s can run on virtual nodes %s", key, strings.Join(targets, ", ")),
				Fix:     daemonSetFix})
		}
	}
	if len(out) == 0 {
		out = append(out, finding{Severity: severityOK, Check: checkDaemonSets, Message: fmt.Sprintf(
			"no DaemonSet can run on virtual nodes (%s, %s)", plural(len(list.Items), "DaemonSet"), plural(len(nodes), "virtual node"))})
	}
	return out, nil
}

// canTargetNode says whether the DaemonSet controller would create a pod of ds for node: the
// shouldRun half of its NodeShouldRunDaemonPod. That, not the scheduler, is the rule that
// matters: the controller counts every node it targets in the DaemonSet's desired pods, whether
// or not a pod can run there.
func canTargetNode(ds *appsv1.DaemonSet, node *corev1.Node) bool {
	spec := ds.Spec.Template.Spec
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false
	}
	// A requirement that does not parse matches nothing; the controller ignores the error too.
	if fits, _ := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec}).Match(node); !fits {
		return false
	}
	tolerations := append(slices.Clone(spec.Tolerations), daemonPodTolerations(spec.HostNetwork)...)
	// false: the Gt/Lt toleration operators are behind an alpha feature gate, off by default.
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false)
	return !untolerated
}

// daemonPodTolerations are the tolerations the DaemonSet controller adds to each of its pods
// (AddOrUpdateDaemonPodTolerations in kubernetes' pkg/controller/daemon/util). Without them a
// NotReady or cordoned virtual node would wrongly look out of every DaemonSet's reach.
func daemonPodTolerations(hostNetwork bool) []corev1.Toleration {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	t := []corev1.Toleration{
		exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
	}
	if hostNetwork {
		t = append(t, exists(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule))
	}
	return t
}

// daemonSetFix tells how to keep a DaemonSet off virtual nodes.
var daemonSetFix = `Fix for the DaemonSets above: keep them off virtual nodes with a required node-affinity
term in their pod template. Add the expression to every term they already have (terms are ORed),
or add this term when they have none. Changing the template rolls the DaemonSet's pods out again;
with the manager running, any template change (e.g. kubectl -n NAMESPACE rollout restart
daemonset NAME) makes Flotilla's webhook add it for you.

` + exclusionYAML()

// exclusionYAML renders the pod-template fragment the manager's DaemonSet webhook gives a template
// without node affinity: one required term holding the vocabulary's exclusion, the requirement the
// webhook adds, so the advice cannot drift from what the webhook does (a test holds the two equal).
func exclusionYAML() string {
	affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{flotillav1.VirtualNodeExclusion()}}}}}}
	fragment := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"affinity": affinity}}}}
	raw, err := yaml.Marshal(fragment)
	if err != nil {
		// An Affinity always encodes; failing here is a programming error, found by the tests.
		panic(fmt.Sprintf("encoding the virtual-node exclusion: %v", err))
	}
	return string(raw)
}

// proxyFindings reports the proxy pods that are Pending.
func proxyFindings(ctx context.Context, c client.Client) ([]finding, error) {
	pods, err := listProxies(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []finding
	for i := range pods {
		if pods[i].Status.Phase == corev1.PodPending {
			out = append(out, pendingProxyFinding(&pods[i]))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	if len(out) == 0 {
		out = append(out, finding{Severity: severityOK, Check: checkProxies,
			Message: fmt.Sprintf("no proxy pod is Pending (%s)", plural(len(pods), "proxy pod"))})
	}
	return out, nil
}

// pendingProxyFinding describes a Pending proxy. Unbound, no secondary could take it (a
// warning); bound, its delegate is still starting in the secondary (information).
func pendingProxyFinding(p *corev1.Pod) finding {
	reason, message := p.Status.Reason, p.Status.Message
	if reason == "" && message == "" {
		// Unschedulable pods say why only in their PodScheduled condition.
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status != corev1.ConditionTrue {
				reason, message = cond.Reason, cond.Message
			}
		}
	}
	key := p.Namespace + "/" + p.Name
	f := finding{Severity: severityWarning, Check: checkProxies, Object: key,
		Message: fmt.Sprintf("proxy %s is Pending, not bound to a virtual node", key)}
	if p.Spec.NodeName != "" {
		f.Severity = severityInfo
		f.Message = fmt.Sprintf("proxy %s is Pending on %s, waiting for its delegate", key, p.Spec.NodeName)
	}
	if why := joinNonEmpty(": ", reason, message); why != "" {
		f.Message += ": " + why
	}
	f.Message += fmt.Sprintf(" (its timeline: flotillactl trace pod %s)", key)
	return f
}

// delegatesCheck compares each secondary's delegates with the proxies bound to its virtual node.
// The proxies are read before and after the secondaries (which are read side by side, each within
// sec.timeout), so that a pod created, started or deleted meanwhile is not taken for a problem.
func delegatesCheck(ctx context.Context, c client.Client, nodes []corev1.Node, sec secondaryAccess) ([]finding, error) {
	out := unusedOverrides(nodes, sec.overrides)
	if len(nodes) == 0 {
		return out, nil
	}
	primaryID, err := clusters.ClusterID(ctx, c)
	if err != nil {
		return out, fmt.Errorf("the primary's ID: %w", err)
	}
	ids, err := registeredClusterIDs(ctx, c)
	if err != nil {
		return out, err
	}
	kc, err := sec.contexts()
	if err != nil {
		return out, err
	}
	before, err := listProxies(ctx, c)
	if err != nil {
		return out, err
	}
	reads := make([]secondaryRead, len(nodes))
	var wg sync.WaitGroup
	for i := range nodes {
		cluster := nodes[i].Labels[flotillav1.LabelCluster]
		wg.Go(func() { reads[i] = readDelegates(ctx, kc, sec, cluster, ids[cluster], primaryID) })
	}
	wg.Wait()
	after, err := listProxies(ctx, c)
	if err != nil {
		return out, err
	}
	var claims corev1.PersistentVolumeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return out, fmt.Errorf("listing claims: %w", err)
	}
	now := time.Now()
	for i := range nodes {
		cluster := nodes[i].Labels[flotillav1.LabelCluster]
		if r := reads[i]; r.unread != nil {
			out = append(out, *r.unread)
		} else {
			out = append(out, delegateFindings(cluster, nodes[i].Name, before, after, r.delegates)...)
			out = append(out, claimFindings(cluster, claims.Items, r.claims, now)...)
		}
	}
	return out, nil
}

// claimSettle is how long a claim's real claim may take to appear once its cluster is decided.
const claimSettle = time.Minute

// claimFindings compares the primary's claims whose data a cluster holds with this primary's
// real claims read there: a claim decided for it a while ago with no real claim (its data is not
// there: deleted by hand?) is an ERROR; a real claim whose primary claim is gone (kept, with its
// data, until someone deletes it) a WARN.
// keptIn says whether a cluster keeps an earlier real claim of a claim (its pod started afresh
// elsewhere while the cluster was unreachable): deleted with the claim, never before.
func keptIn(pvc *corev1.PersistentVolumeClaim, cluster string) bool {
	return slices.Contains(strings.Split(pvc.Annotations[flotillav1.AnnotationVolumeRetainedIn], ","), cluster)
}

func claimFindings(cluster string, primary, real []corev1.PersistentVolumeClaim, now time.Time) []finding {
	realOf := map[string]bool{}
	for i := range real {
		realOf[real[i].Annotations[flotillav1.AnnotationClaimUID]] = true
	}
	uids := map[string]bool{}
	var out []finding
	held := 0
	for i := range primary {
		p := &primary[i]
		if keptIn(p, cluster) {
			// Kept from before its pod started afresh elsewhere: deleted with the primary claim.
			uids[string(p.UID)] = true
		}
		if p.Annotations[flotillav1.AnnotationVolumeCluster] != cluster {
			continue
		}
		uids[string(p.UID)] = true
		held++
		if realOf[string(p.UID)] || p.DeletionTimestamp != nil || now.Sub(p.CreationTimestamp.Time) < claimSettle {
			continue
		}
		key := p.Namespace + "/" + p.Name
		out = append(out, finding{Severity: severityError, Check: checkClaims, Cluster: cluster, Object: key,
			Message: fmt.Sprintf("claim %s holds its data in %s, which has no real claim of it: its pods find no data there "+
				"(was the real claim deleted by hand?)", key, cluster)})
	}
	for i := range real {
		r := &real[i]
		if uids[r.Annotations[flotillav1.AnnotationClaimUID]] || r.DeletionTimestamp != nil {
			continue
		}
		key := r.Namespace + "/" + r.Name
		out = append(out, finding{Severity: severityWarning, Check: checkClaims, Cluster: cluster, Object: key,
			Message: fmt.Sprintf("real claim %s in %s has no claim in the primary: its data is kept there; delete it in %s if it is not needed",
				key, cluster, cluster)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	if len(out) > 0 {
		return out
	}
	if held == 0 {
		return nil
	}
	return []finding{{Severity: severityOK, Check: checkClaims, Cluster: cluster,
		Message: fmt.Sprintf("%s: %s, one per claim whose data it holds", cluster, plural(held, "real claim"))}}
}

// unusedOverrides warns about each --secondary-context for a cluster with no virtual node: most
// likely a misspelt name, which leaves the intended cluster on its default context.
func unusedOverrides(nodes []corev1.Node, overrides map[string]string) []finding {
	known := map[string]bool{}
	for i := range nodes {
		known[nodes[i].Labels[flotillav1.LabelCluster]] = true
	}
	var out []finding
	for _, cluster := range slices.Sorted(maps.Keys(overrides)) {
		if !known[cluster] {
			out = append(out, finding{Severity: severityWarning, Check: checkDelegates, Cluster: cluster, Message: fmt.Sprintf(
				"--secondary-context %s=%s names no cluster with a virtual node", cluster, overrides[cluster])})
		}
	}
	return out
}

// registeredClusterIDs maps each cluster to the ID (kube-system UID) the manager recorded for it
// in its ClusterDetector, so doctor can tell that a context of the user's reaches that cluster
// and not another of the same name.
func registeredClusterIDs(ctx context.Context, c client.Client) (map[string]string, error) {
	var list flotillav1.ClusterDetectorList
	if err := c.List(ctx, &list, client.InNamespace(flotillav1.SystemNamespace)); err != nil {
		return nil, fmt.Errorf("listing ClusterDetectors: %w", err)
	}
	ids := map[string]string{}
	for i := range list.Items {
		ids[list.Items[i].Name] = list.Items[i].Status.ClusterID
	}
	return ids, nil
}

// listProxies lists the proxy pods in the primary.
func listProxies(ctx context.Context, c client.Client) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.MatchingLabels{flotillav1.LabelProxy: "true"}); err != nil {
		return nil, fmt.Errorf("listing proxy pods: %w", err)
	}
	return pods.Items, nil
}

// secondaryRead is what doctor read of one secondary: its delegates, or why it could not.
type secondaryRead struct {
	delegates []corev1.Pod
	// claims are this primary's real claims there (of claims of class flotilla).
	claims []corev1.PersistentVolumeClaim
	unread *finding
}

// secondaryContextFor picks the user's context for a cluster: the one --secondary-context names,
// else the context named like the cluster, else the context the cluster's name was derived from
// at join or add (gke_…, EKS ARNs).
func secondaryContextFor(cluster string, overrides map[string]string, names []string) (string, bool) {
	if c, ok := overrides[cluster]; ok {
		return c, true
	}
	if slices.Contains(names, cluster) {
		return cluster, true
	}
	for _, n := range names {
		if clusters.ClusterName(n) == cluster {
			return n, true
		}
	}
	return "", false
}

// readDelegates lists this primary's delegates in a secondary with the user's context for it,
// every call within sec.timeout. A secondary doctor cannot read, or whose context reaches another
// cluster than the one registered (whose delegates would all look missing), yields a finding.
func readDelegates(ctx context.Context, kc kubeContexts, sec secondaryAccess, cluster, registeredID, primaryID string) secondaryRead {
	contextName, ok := secondaryContextFor(cluster, sec.overrides, kc.names)
	if !ok {
		return secondaryRead{unread: &finding{Severity: severityInfo, Check: checkDelegates, Cluster: cluster, Message: fmt.Sprintf(
			"delegates in %s not checked: your kubeconfig has no context %s; name one with --secondary-context %s=CONTEXT",
			cluster, cluster, cluster)}}
	}
	unread := func(why string) secondaryRead {
		return secondaryRead{unread: &finding{Severity: severityWarning, Check: checkDelegates, Cluster: cluster,
			Message: fmt.Sprintf("delegates in %s not checked: context %s: %s", cluster, contextName, why)}}
	}
	ctx, cancel := context.WithTimeout(ctx, sec.timeout)
	defer cancel()
	failed := func(err error) secondaryRead {
		why := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			why += fmt.Sprintf(" (no answer within %s)", sec.timeout)
		}
		return unread(why)
	}
	c, err := kc.connect(contextName, sec.timeout)
	if err != nil {
		return failed(err)
	}
	id, err := clusters.ClusterID(ctx, c)
	if err != nil {
		return failed(err)
	}
	switch {
	case id == primaryID:
		return unread(fmt.Sprintf("it reaches the primary, not %s; name its context with --secondary-context %s=CONTEXT", cluster, cluster))
	case registeredID != "" && id != registeredID:
		return unread(fmt.Sprintf("it reaches cluster %s, but %s is cluster %s (its ClusterDetector's clusterID); "+
			"name its context with --secondary-context %s=CONTEXT", id, cluster, registeredID, cluster))
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.MatchingLabels{flotillav1.LabelPrimary: primaryID}); err != nil {
		return failed(fmt.Errorf("listing delegates: %w", err))
	}
	var claims corev1.PersistentVolumeClaimList
	if err := c.List(ctx, &claims, client.MatchingLabels{flotillav1.LabelPrimary: primaryID}); err != nil {
		return failed(fmt.Errorf("listing real claims: %w", err))
	}
	return secondaryRead{delegates: pods.Items, claims: claims.Items}
}

// delegateFindings compares the delegates read from a cluster with the proxies bound to its
// virtual node, read before and after them: a proxy lacks its delegate only when it is Running in
// both reads (one that fails or goes meanwhile is being handled), and a delegate lacks its proxy
// only when neither read has one (its proxy may be newer than the first read).
func delegateFindings(cluster, node string, before, after, delegates []corev1.Pod) []finding {
	proxiesBefore, proxiesAfter := proxiesOn(node, before), proxiesOn(node, after)
	delegated := map[types.UID]bool{}
	matched := 0
	var missing, orphans []finding
	for i := range delegates {
		d := &delegates[i]
		uid := types.UID(d.Annotations[flotillav1.AnnotationProxyUID])
		if uid == "" {
			continue // labelled, but no delegate: the manager's sweep leaves it too
		}
		delegated[uid] = true
		if proxiesBefore[uid] != nil || proxiesAfter[uid] != nil {
			matched++
			continue
		}
		if d.DeletionTimestamp != nil {
			continue // already going
		}
		key := d.Namespace + "/" + d.Name
		orphans = append(orphans, finding{Severity: severityWarning, Check: checkDelegates, Cluster: cluster, Object: key,
			Message: fmt.Sprintf("delegate %s in %s has no proxy: the manager's sweep deletes it; if it stays, "+
				"is the manager running and %s Ready?", key, cluster, node)})
	}
	for uid, p := range proxiesBefore {
		if delegated[uid] || !runningProxy(p) || !runningProxy(proxiesAfter[uid]) {
			continue
		}
		key := p.Namespace + "/" + p.Name
		missing = append(missing, finding{Severity: severityError, Check: checkDelegates, Cluster: cluster, Object: key,
			Message: fmt.Sprintf("proxy %s is Running on %s but %s holds no delegate of it: the manager re-elects it "+
				"once it sees the loss; if this stays, is the manager running?", key, node, cluster)})
	}
	byObject := func(fs []finding) { sort.Slice(fs, func(i, j int) bool { return fs[i].Object < fs[j].Object }) }
	byObject(missing)
	byObject(orphans)
	if out := append(missing, orphans...); len(out) > 0 {
		return out
	}
	return []finding{{Severity: severityOK, Check: checkDelegates, Cluster: cluster,
		Message: fmt.Sprintf("%s: %s, one per proxy", cluster, plural(matched, "delegate"))}}
}

// proxiesOn indexes by UID the proxies bound to a node.
func proxiesOn(node string, pods []corev1.Pod) map[types.UID]*corev1.Pod {
	out := map[types.UID]*corev1.Pod{}
	for i := range pods {
		if pods[i].Spec.NodeName == node {
			out[pods[i].UID] = &pods[i]
		}
	}
	return out
}

// runningProxy says whether a proxy is Running and not terminating (nil: not there).
func runningProxy(p *corev1.Pod) bool {
	return p != nil && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
}

// webhookFindings checks that the MutatingWebhookConfiguration exists; the manager writes it at
// start, so its absence means the manager never ran or someone deleted it.
func webhookFindings(ctx context.Context, c client.Client) ([]finding, error) {
	names, err := installnames.Find(ctx, c, flotillav1.SystemNamespace)
	if err != nil {
		return nil, err
	}
	name := names.WebhookConfiguration
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	err = c.Get(ctx, client.ObjectKey{Name: name}, &cfg)
	if apierrors.IsNotFound(err) {
		return []finding{{Severity: severityError, Check: checkWebhook, Object: name, Message: fmt.Sprintf(
			"MutatingWebhookConfiguration %s is missing: elected pods run in the primary and DaemonSets are not kept "+
				"off virtual nodes; the manager creates it when it starts (is it running?)", name)}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", name, err)
	}
	return []finding{{Severity: severityOK, Check: checkWebhook, Object: name,
		Message: fmt.Sprintf("MutatingWebhookConfiguration %s is present (%s)", name, plural(len(cfg.Webhooks), "webhook"))}}, nil
}

// printDoctorText prints a line per finding, each distinct fix once, and a summary.
func printDoctorText(out io.Writer, findings []finding) error {
	var b strings.Builder
	var fixes []string
	for _, f := range findings {
		fmt.Fprintf(&b, "%-5s %s\n", f.Severity, f.Message)
		if f.Fix != "" && !slices.Contains(fixes, f.Fix) {
			fixes = append(fixes, f.Fix)
		}
	}
	for _, fix := range fixes {
		fmt.Fprintf(&b, "\n%s", indent(fix, "  "))
	}
	counts := countSeverity(findings)
	fmt.Fprintf(&b, "\nSummary: %s, %s, %d info, %d OK\n", plural(counts[severityError], "error"),
		plural(counts[severityWarning], "warning"), counts[severityInfo], counts[severityOK])
	_, err := io.WriteString(out, b.String())
	return err
}

// doctorReport is doctor's JSON output.
type doctorReport struct {
	Findings []finding        `json:"findings"`
	Summary  map[severity]int `json:"summary"`
}

// countSeverity counts the findings of each severity (every severity present, even at 0).
func countSeverity(findings []finding) map[severity]int {
	counts := map[severity]int{severityOK: 0, severityInfo: 0, severityWarning: 0, severityError: 0}
	for _, f := range findings {
		counts[f.Severity]++
	}
	return counts
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// joinNonEmpty joins the parts that are not empty.
func joinNonEmpty(sep string, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}

// indent prefixes every non-empty line of s.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}
