package election

import (
	"context"

	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Options change what is elected.
type Options struct {
	// AcceptAdmiralty makes multicluster.admiralty.io/elect elect too.
	AcceptAdmiralty bool
	// Choose, when set, binds the proxy at admission: it gets one index of weights (the free CPU
	// of the feasible clusters holding the fewest siblings, or furthest behind the pod's
	// flotilla.dev/cluster-weights split) and the proxy's nodeName is that cluster's virtual node. Nil leaves the choice among the feasible clusters to the primary's
	// scheduler.
	Choose func(weights []int64) int
	// Devices is what the webhook read of the pod's device claims (DRA): what each requests, and
	// the cluster where pods already use a claim it names.
	Devices placement.DeviceClaims
	// QuotaGate: the pod's namespace has a FleetQuota. The proxy waits behind
	// flotillav1.SchedulingGateQuota, annotated waiting, until the quota controller admits it;
	// it is never bound at admission.
	QuotaGate bool
}

// Elected says whether a pod asks to be elected.
func Elected(pod *corev1.Pod, opts Options) bool {
	if _, ok := pod.Labels[flotillav1.LabelPrimary]; ok {
		return false // a delegate of another primary (or of this one, in a cluster that is both)
	}
	if _, ok := pod.Annotations[flotillav1.AnnotationElect]; ok {
		return true
	}
	_, ok := pod.Annotations[flotillav1.AnnotationAdmiraltyElect]
	return ok && opts.AcceptAdmiralty
}

// Admit is the whole admission decision for a pod in a namespace with the given labels: an
// elected pod whose delegate the namespace's Pod Security level would refuse is refused (the
// primary's own admission sees only the proxy, without host networking or host ports), else it
// becomes a proxy (Mutate). Pure: the fuzz test drives it.
func Admit(ctx context.Context, pod *corev1.Pod, namespaceLabels map[string]string, clusters []placement.ClusterView, claims map[string]placement.ClaimView, opts Options) (*corev1.Pod, error) {
	if !Elected(pod, opts) {
		return pod, nil
	}
	if v := translate.PodSecurityViolation(&pod.ObjectMeta, &pod.Spec, namespaceLabels); v != "" {
		return nil, placement.Rejectf("flotilla cannot elect this pod: its delegate would run as written and %s (the level of namespace %s)", v, pod.Namespace)
	}
	return Mutate(ctx, pod, clusters, claims, opts)
}

// Mutate turns an elected pod into a proxy (claims: what the primary holds of the claims its
// volumes use, by name): where it may go (decidePlacement) as a required node
// affinity on flotilla.dev/cluster, a binding or a scheduling gate, the user's constraints moved to
// an annotation for the delegate, the tolerations a proxy needs, host networking stripped, the
// proxy label and the delegate finalizer. It returns a *placement.Rejection when the pod cannot be
// offloaded, no cluster is registered or chosen, its steering annotations cannot be honoured, or
// it already carries what only Flotilla sets: nothing of a proxy is ever taken from the request (the webhook
// runs once per CREATE, reinvocationPolicy Never, so a pod arriving with a proxy's label or
// constraints was not made by it).
func Mutate(ctx context.Context, pod *corev1.Pod, clusters []placement.ClusterView, claims map[string]placement.ClaimView, opts Options) (*corev1.Pod, error) {
	if !Elected(pod, opts) {
		return pod, nil
	}
	if err := notForged(pod); err != nil {
		return nil, err
	}
	if err := offloadable(pod); err != nil {
		return nil, err
	}
	failover, err := placement.FailoverSeconds(pod)
	if err != nil {
		return nil, err
	}
	if err := placement.CheckOnVolumeClusterLoss(pod); err != nil {
		return nil, err
	}
	constraints := placement.DelegateConstraints(pod)
	if constraints.DataClaim, constraints.DataCluster, err = placement.DataCluster(pod, claims); err != nil {
		return nil, err
	}
	constraints.Devices, constraints.ClaimCluster, constraints.SharedClaim = opts.Devices.Specs, opts.Devices.Cluster, opts.Devices.Shared
	decided := pod
	if opts.QuotaGate {
		// Gated, it is not bound here: the quota controller admits it, and the primary's
		// scheduler binds it among its clusters.
		decided = pod.DeepCopy()
		decided.Spec.SchedulingGates = append(decided.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: flotillav1.SchedulingGateQuota})
	}
	place, err := placement.Decide(ctx, decided, constraints, clusters, opts.Choose)
	if err != nil {
		return nil, err
	}
	out := pod.DeepCopy()
	translate.TakeResourceClaims(&out.Spec, &constraints)
	raw, err := json.Marshal(constraints)
	if err != nil {
		return nil, fmt.Errorf("encoding the delegate constraints: %w", err)
	}

	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[flotillav1.LabelProxy] = "true"
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[flotillav1.AnnotationDelegateConstraints] = string(raw)
	if !hasString(out.Finalizers, flotillav1.FinalizerDelegate) {
		out.Finalizers = append(out.Finalizers, flotillav1.FinalizerDelegate)
	}
	out.Spec.NodeSelector = nil
	// Spreads across clusters stay on the proxy, for the primary's scheduler.
	out.Spec.TopologySpreadConstraints = place.Spread
	// Only ever the webhook's own.
	delete(out.Annotations, flotillav1.AnnotationNoClusterFits)
	delete(out.Annotations, flotillav1.AnnotationAdmittedBy)
	delete(out.Annotations, flotillav1.AnnotationQuota)
	delete(out.Annotations, flotillav1.AnnotationQuotaExceeded)
	delete(out.Annotations, flotillav1.AnnotationGangCluster)
	out.Spec.SchedulingGates = slices.DeleteFunc(out.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == flotillav1.SchedulingGateQuota
	})
	if opts.QuotaGate {
		out.Annotations[flotillav1.AnnotationQuota] = flotillav1.QuotaWaiting
		out.Spec.SchedulingGates = append(out.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: flotillav1.SchedulingGateQuota})
	}
	if len(place.Feasible) == 0 {
		out.Annotations[flotillav1.AnnotationNoClusterFits] = place.Why
	}
	if place.Gated {
		out.Spec.SchedulingGates = append(out.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: flotillav1.SchedulingGatePlacement})
	}
	out.Spec.Affinity = translate.ClusterAffinity(place.Affinity)
	out.Spec.Tolerations = placement.ProxyTolerations(failover)
	if place.Cluster != "" {
		out.Spec.NodeName = flotillav1.VirtualNodeName(place.Cluster)
	}
	out.Spec.HostNetwork = false
	stripHostPorts(out.Spec.InitContainers)
	stripHostPorts(out.Spec.Containers)
	return out, nil
}

// notForged refuses a pod that arrives with what only Flotilla sets on a proxy: its label,
// finalizer, or annotations (the delegate's constraints, IP, proxy UID). Taken as they are, they
// would let a tenant choose its delegate's host networking, tolerations and node.
func notForged(pod *corev1.Pod) error {
	var found []string
	if _, ok := pod.Labels[flotillav1.LabelProxy]; ok {
		found = append(found, "label "+flotillav1.LabelProxy)
	}
	for _, a := range []string{flotillav1.AnnotationDelegateConstraints, flotillav1.AnnotationDelegateIP, flotillav1.AnnotationProxyUID, flotillav1.AnnotationSeal} {
		if _, ok := pod.Annotations[a]; ok {
			found = append(found, "annotation "+a)
		}
	}
	if hasString(pod.Finalizers, flotillav1.FinalizerDelegate) {
		found = append(found, "finalizer "+flotillav1.FinalizerDelegate)
	}
	if len(found) > 0 {
		return placement.Rejectf("flotilla cannot elect this pod: it carries %s, which only Flotilla sets on the proxies it makes; remove them and create the pod as written",
			strings.Join(found, ", "))
	}
	return nil
}

// offloadable refuses what a delegate cannot have in another cluster (translate.NotOffloadable,
// which the proxy reconciler asks again), and a pod already bound.
func offloadable(pod *corev1.Pod) error {
	problems := translate.NotOffloadable(&pod.Spec)
	if pod.Spec.NodeName != "" {
		problems = append(problems, fmt.Sprintf("it is already bound to node %s", pod.Spec.NodeName))
	}
	if len(problems) > 0 {
		return placement.Rejectf("flotilla cannot elect this pod: %s", strings.Join(problems, "; "))
	}
	return nil
}

func stripHostPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			containers[i].Ports[j].HostPort = 0
			containers[i].Ports[j].HostIP = ""
		}
	}
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
