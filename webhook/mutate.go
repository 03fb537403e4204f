package webhook

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
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
}

// Rejection is an elected pod Flotilla cannot honour; its message says why.
type Rejection struct{ Message string }

func (r *Rejection) Error() string { return r.Message }

func reject(format string, args ...any) *Rejection {
	return &Rejection{Message: fmt.Sprintf(format, args...)}
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
func Admit(pod *corev1.Pod, namespaceLabels map[string]string, clusters []ClusterView, claims map[string]ClaimView, opts Options) (*corev1.Pod, error) {
	if !Elected(pod, opts) {
		return pod, nil
	}
	if v := translate.PodSecurityViolation(&pod.ObjectMeta, &pod.Spec, namespaceLabels); v != "" {
		return nil, reject("flotilla cannot elect this pod: its delegate would run as written and %s (the level of namespace %s)", v, pod.Namespace)
	}
	return Mutate(pod, clusters, claims, opts)
}

// Mutate turns an elected pod into a proxy (claims: what the primary holds of the claims its
// volumes use, by name): where it may go (decidePlacement) as a required node
// affinity on flotilla.dev/cluster, a binding or a scheduling gate, the user's constraints moved to
// an annotation for the delegate, the tolerations a proxy needs, host networking stripped, the
// proxy label and the delegate finalizer. It returns a *Rejection when the pod cannot be
// offloaded, no cluster is registered or chosen, its steering annotations cannot be honoured, or
// it already carries what only Flotilla sets: nothing of a proxy is ever taken from the request (the webhook
// runs once per CREATE, reinvocationPolicy Never, so a pod arriving with a proxy's label or
// constraints was not made by it).
func Mutate(pod *corev1.Pod, clusters []ClusterView, claims map[string]ClaimView, opts Options) (*corev1.Pod, error) {
	if !Elected(pod, opts) {
		return pod, nil
	}
	if err := notForged(pod); err != nil {
		return nil, err
	}
	if err := offloadable(pod); err != nil {
		return nil, err
	}
	failover, err := failoverSeconds(pod)
	if err != nil {
		return nil, err
	}
	if err := onVolumeClusterLoss(pod); err != nil {
		return nil, err
	}
	constraints := constraintsOf(pod)
	if constraints.DataClaim, constraints.DataCluster, err = dataCluster(pod, claims); err != nil {
		return nil, err
	}
	place, err := decidePlacement(pod, constraints, clusters, opts.Choose)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(constraints)
	if err != nil {
		return nil, fmt.Errorf("encoding the delegate constraints: %w", err)
	}

	out := pod.DeepCopy()
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
	out.Spec.TopologySpreadConstraints = place.spread
	// Only ever the webhook's own.
	delete(out.Annotations, flotillav1.AnnotationNoClusterFits)
	delete(out.Annotations, flotillav1.AnnotationAdmittedBy)
	if len(place.feasible) == 0 {
		out.Annotations[flotillav1.AnnotationNoClusterFits] = place.why
	}
	if place.gated {
		out.Spec.SchedulingGates = append(out.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: flotillav1.SchedulingGatePlacement})
	}
	out.Spec.Affinity = translate.ClusterAffinity(place.affinity)
	out.Spec.Tolerations = proxyTolerations(failover)
	if place.cluster != "" {
		out.Spec.NodeName = flotillav1.VirtualNodeName(place.cluster)
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
		return reject("flotilla cannot elect this pod: it carries %s, which only Flotilla sets on the proxies it makes; remove them and create the pod as written",
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
		return reject("flotilla cannot elect this pod: %s", strings.Join(problems, "; "))
	}
	return nil
}

func failoverSeconds(pod *corev1.Pod) (int64, error) {
	v, ok := pod.Annotations[flotillav1.AnnotationFailoverSeconds]
	if !ok {
		return flotillav1.DefaultFailoverSeconds, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, reject("annotation %s must be a whole number of seconds, not %q", flotillav1.AnnotationFailoverSeconds, v)
	}
	return n, nil
}

// onVolumeClusterLoss refuses a flotilla.dev/on-volume-cluster-loss the pod cannot have: a value
// other than wait or recreate, or recreate on a pod that also says it must never run twice
// (flotilla.dev/at-most-once): starting afresh elsewhere while the old pod may still run in the
// unreachable cluster is exactly what that forbids.
func onVolumeClusterLoss(pod *corev1.Pod) error {
	v, ok := pod.Annotations[flotillav1.AnnotationOnVolumeClusterLoss]
	if !ok {
		return nil
	}
	switch v {
	case flotillav1.OnVolumeClusterLossWait:
		return nil
	case flotillav1.OnVolumeClusterLossRecreate:
		if _, once := pod.Annotations[flotillav1.AnnotationAtMostOnce]; once {
			return reject("annotations %s: %s and %s contradict each other: a pod that must never run twice cannot start again elsewhere while its cluster is unreachable",
				flotillav1.AnnotationOnVolumeClusterLoss, v, flotillav1.AnnotationAtMostOnce)
		}
		return nil
	}
	return reject("annotation %s must be %s (the default: wait for the cluster that holds the data) or %s (start on fresh, empty claims elsewhere after the failover bound), not %q",
		flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossWait, flotillav1.OnVolumeClusterLossRecreate, v)
}

func constraintsOf(pod *corev1.Pod) translate.Constraints {
	c := translate.Constraints{NodeSelector: pod.Spec.NodeSelector, Affinity: pod.Spec.Affinity, HostNetwork: pod.Spec.HostNetwork}
	for _, t := range pod.Spec.TopologySpreadConstraints {
		if !acrossClusters(t) {
			c.TopologySpreadConstraints = append(c.TopologySpreadConstraints, t)
		}
	}
	// Tolerations the DefaultTolerationSeconds plugin (or the user) put there for the primary's own
	// not-ready/unreachable taints are the proxy's business, not the delegate's.
	for _, t := range pod.Spec.Tolerations {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable || t.Key == flotillav1.TaintUnreachable ||
			t.Key == flotillav1.TaintVirtualNode {
			continue
		}
		c.Tolerations = append(c.Tolerations, t)
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, ctr := range list {
			for _, p := range ctr.Ports {
				if p.HostPort != 0 {
					if c.HostPorts == nil {
						c.HostPorts = map[string]int32{}
					}
					c.HostPorts[translate.HostPortKey(ctr.Name, p)] = p.HostPort
				}
			}
		}
	}
	return c
}

func stripHostPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			containers[i].Ports[j].HostPort = 0
			containers[i].Ports[j].HostIP = ""
		}
	}
}

func proxyTolerations(failover int64) []corev1.Toleration {
	return []corev1.Toleration{
		{Key: flotillav1.TaintVirtualNode, Operator: corev1.TolerationOpEqual, Value: flotillav1.TaintVirtualNodeValue, Effect: corev1.TaintEffectNoSchedule},
		// Without tolerationSeconds: a dead manager (lease lapsed, node Unknown) never evicts proxies.
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		// Failover: Flotilla taints the node of a secondary that stays unreachable.
		{Key: flotillav1.TaintUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &failover},
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

// ClaimView is what admission knows of a PersistentVolumeClaim an elected pod uses.
type ClaimView struct {
	// Found says whether the claim exists (a pod may be created before its claim, as Kubernetes
	// allows: its delegate then waits for the real claim).
	Found bool
	// Class is its storage class.
	Class string
	// Cluster is the cluster that holds its data, once it is bound ("" before).
	Cluster string
}

// dataCluster refuses a claim whose storage cannot follow the pod (another class than flotilla)
// and returns the claim whose data decides the pod's cluster, and that cluster ("" when no claim
// is bound yet). Claims bound in two clusters cannot both be reached: refused.
func dataCluster(pod *corev1.Pod, claims map[string]ClaimView) (claim, cluster string, err error) {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		name := v.PersistentVolumeClaim.ClaimName
		c := claims[name]
		if !c.Found {
			continue
		}
		if c.Class != flotillav1.StorageClassRemote {
			return "", "", reject("flotilla cannot elect this pod: volume %s uses claim %s of storage class %q, whose data stays in this cluster; only claims of class %s follow an elected pod",
				v.Name, name, c.Class, flotillav1.StorageClassRemote)
		}
		if c.Cluster == "" {
			continue
		}
		if cluster != "" && cluster != c.Cluster {
			return "", "", reject("flotilla cannot elect this pod: the data of claim %s is in cluster %s and that of claim %s in cluster %s; a pod runs in one cluster",
				claim, cluster, name, c.Cluster)
		}
		claim, cluster = name, c.Cluster
	}
	return claim, cluster, nil
}
