package translate

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// serviceAccountVolumePrefix names the projected token volume the primary injects; the secondary
// injects its own.
const serviceAccountVolumePrefix = "kube-api-access-"

// Owner is the FlotillaPrimary every delegate is owned by in its secondary.
func Owner(primaryID string, uid string) metav1.OwnerReference {
	f := false
	t := true
	return metav1.OwnerReference{APIVersion: flotillav1.GroupVersion.String(), Kind: "FlotillaPrimary", Name: primaryID,
		UID: typesUID(uid), Controller: &t, BlockOwnerDeletion: &f}
}

// Delegate builds the delegate of a proxy. Copied: containers, init containers, volumes (but the
// primary's service account token volume), restart policy, grace periods, DNS, security context,
// image pull secrets, service account, host aliases, runtime class, labels, annotations (but
// flotilla.dev/*), and the user's scheduling constraints and host networking kept by the webhook.
// The priority class by name (the secondary resolves it; a class it lacks leaves the delegate
// uncreated and the proxy Pending with the reason, PriorityClassMissing).
// Not copied: owner references, finalizers, node name, the resolved priority, overhead,
// scheduling gates, the workload reference (the Workload is the primary's; Flotilla places its
// gang whole), status. Added: the FlotillaPrimary owner, flotilla.dev/primary and flotilla.dev/proxy-uid.
// Env values are never resolved: secret and config map references stay references.
func Delegate(proxy *corev1.Pod, primaryID string, owner metav1.OwnerReference) (*corev1.Pod, error) {
	c, err := ConstraintsOf(proxy)
	if err != nil {
		return nil, err
	}
	d := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: proxy.Name, Namespace: proxy.Namespace,
		Labels:          map[string]string{},
		Annotations:     map[string]string{flotillav1.AnnotationProxyUID: string(proxy.UID)},
		OwnerReferences: []metav1.OwnerReference{owner},
	}}
	for k, v := range proxy.Labels {
		if k != flotillav1.LabelProxy {
			d.Labels[k] = v
		}
	}
	d.Labels[flotillav1.LabelPrimary] = primaryID
	if AtMostOnce(proxy) {
		// The sweep, which sees only the delegate once its proxy is gone, must know it too.
		d.Annotations[flotillav1.AnnotationAtMostOnce] = ""
	}
	for k, v := range proxy.Annotations {
		if !strings.HasPrefix(k, "flotilla.dev/") && k != corev1.LastAppliedConfigAnnotation {
			d.Annotations[k] = v
		}
	}
	s := proxy.Spec
	var volumes []corev1.Volume
	for _, v := range s.Volumes {
		v := *v.DeepCopy()
		if RemoteEphemeral(v) {
			// Its claim is the primary's ephemeral claim made again there, by Flotilla: the
			// secondary's ephemeral controller would make one of its own, of another owner.
			v.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: EphemeralClaimName(proxy.Name, v.Name)}}
		}
		volumes = append(volumes, v)
	}
	d.Spec = corev1.PodSpec{
		Volumes:                       volumes,
		InitContainers:                containers(s.InitContainers, c.HostPorts),
		Containers:                    containers(s.Containers, c.HostPorts),
		RestartPolicy:                 s.RestartPolicy,
		TerminationGracePeriodSeconds: s.TerminationGracePeriodSeconds,
		ActiveDeadlineSeconds:         s.ActiveDeadlineSeconds,
		DNSPolicy:                     s.DNSPolicy,
		DNSConfig:                     s.DNSConfig.DeepCopy(),
		ServiceAccountName:            s.ServiceAccountName,
		AutomountServiceAccountToken:  s.AutomountServiceAccountToken,
		SecurityContext:               s.SecurityContext.DeepCopy(),
		ImagePullSecrets:              append([]corev1.LocalObjectReference(nil), s.ImagePullSecrets...),
		Hostname:                      s.Hostname,
		Subdomain:                     s.Subdomain,
		HostAliases:                   append([]corev1.HostAlias(nil), s.HostAliases...),
		HostPID:                       s.HostPID,
		HostIPC:                       s.HostIPC,
		ShareProcessNamespace:         s.ShareProcessNamespace,
		RuntimeClassName:              s.RuntimeClassName,
		PriorityClassName:             s.PriorityClassName,
		EnableServiceLinks:            s.EnableServiceLinks,
		SetHostnameAsFQDN:             s.SetHostnameAsFQDN,
		OS:                            s.OS.DeepCopy(),
		HostUsers:                     s.HostUsers,
		// Pod-level requests and limits: the secondary's scheduler and kubelet size the pod by them.
		Resources: s.Resources.DeepCopy(),
		// DRA claims a proxy still carries (one the webhook did not make); the webhook's are in c.
		ResourceClaims: slices.Clone(s.ResourceClaims),
		// The user's constraints, kept by the webhook, apply to the secondary's nodes.
		NodeSelector:              c.NodeSelector,
		Affinity:                  c.Affinity,
		Tolerations:               c.Tolerations,
		TopologySpreadConstraints: c.TopologySpreadConstraints,
		HostNetwork:               c.HostNetwork,
	}
	giveResourceClaims(&d.Spec, c)
	DropPrimaryToken(&d.Spec)
	return d, nil
}

// isPrimaryToken says whether a proxy's volume is the service account token the primary projected
// into it: the delegate gets its secondary's instead.
func isPrimaryToken(v corev1.Volume) bool {
	return strings.HasPrefix(v.Name, serviceAccountVolumePrefix) && v.Projected != nil
}

// DropPrimaryToken removes, in place, the primary's token volumes from a pod spec and their
// mounts from every container: what a delegate must not carry, and what the proxy cache does not
// keep. The arrays' tails are cleared, so nothing dropped stays reachable behind a slice.
func DropPrimaryToken(spec *corev1.PodSpec) {
	var tokens map[string]bool
	for _, v := range spec.Volumes {
		if isPrimaryToken(v) {
			if tokens == nil {
				tokens = map[string]bool{}
			}
			tokens[v.Name] = true
		}
	}
	if tokens == nil {
		return
	}
	spec.Volumes = nilIfEmpty(slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return tokens[v.Name] }))
	drop := func(m corev1.VolumeMount) bool { return tokens[m.Name] }
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			list[i].VolumeMounts = nilIfEmpty(slices.DeleteFunc(list[i].VolumeMounts, drop))
		}
	}
	for i := range spec.EphemeralContainers {
		c := &spec.EphemeralContainers[i].EphemeralContainerCommon
		c.VolumeMounts = nilIfEmpty(slices.DeleteFunc(c.VolumeMounts, drop))
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func containers(in []corev1.Container, hostPorts map[string]int32) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, 0, len(in))
	for _, ctr := range in {
		c := *ctr.DeepCopy()
		for i, p := range c.Ports {
			if hp, ok := hostPorts[HostPortKey(c.Name, p)]; ok {
				c.Ports[i].HostPort = hp
			}
		}
		out = append(out, c)
	}
	return out
}

// ImageUpdates are the container images of the proxy that differ from its delegate's, by
// container name (Kubernetes lets a running pod's images change, nothing else of its
// containers): what to patch into the delegate. Nil when they agree.
func ImageUpdates(proxy, delegate *corev1.Pod) map[string]string {
	var out map[string]string
	for _, list := range [][2][]corev1.Container{{proxy.Spec.InitContainers, delegate.Spec.InitContainers}, {proxy.Spec.Containers, delegate.Spec.Containers}} {
		want := map[string]string{}
		for _, c := range list[0] {
			want[c.Name] = c.Image
		}
		for _, c := range list[1] {
			if img, ok := want[c.Name]; ok && img != c.Image {
				if out == nil {
					out = map[string]string{}
				}
				out[c.Name] = img
			}
		}
	}
	return out
}

// ResourceUpdates are the requests and limits of the proxy's containers that differ from its
// delegate's, by container name: an in-place resize of the proxy (its resize subresource), to be
// made on the delegate the same way. Only regular containers are resized in place.
func ResourceUpdates(proxy, delegate *corev1.Pod) map[string]corev1.ResourceRequirements {
	want := map[string]corev1.ResourceRequirements{}
	for _, c := range proxy.Spec.Containers {
		want[c.Name] = c.Resources
	}
	var out map[string]corev1.ResourceRequirements
	for _, c := range delegate.Spec.Containers {
		r, ok := want[c.Name]
		if !ok || (equality.Semantic.DeepEqual(r.Requests, c.Resources.Requests) && equality.Semantic.DeepEqual(r.Limits, c.Resources.Limits)) {
			continue
		}
		if out == nil {
			out = map[string]corev1.ResourceRequirements{}
		}
		out[c.Name] = corev1.ResourceRequirements{Requests: r.Requests.DeepCopy(), Limits: r.Limits.DeepCopy()}
	}
	return out
}

// NewEphemeralContainers are the proxy's ephemeral containers (`kubectl debug`) its delegate does
// not have yet, by name: they can only be added, never changed or removed.
func NewEphemeralContainers(proxy, delegate *corev1.Pod) []corev1.EphemeralContainer {
	have := map[string]bool{}
	for _, c := range delegate.Spec.EphemeralContainers {
		have[c.Name] = true
	}
	var out []corev1.EphemeralContainer
	for _, c := range proxy.Spec.EphemeralContainers {
		if !have[c.Name] {
			out = append(out, *c.DeepCopy())
		}
	}
	return out
}

// AtMostOnce says whether a pod must never run twice: a StatefulSet's, one with a
// PersistentVolumeClaim, or one annotated flotilla.dev/at-most-once. Its proxy stays Terminating until its delegate is proven gone or its
// secondary is fenced, and its delegate is never force-deleted.
func AtMostOnce(pod *corev1.Pod) bool {
	if _, ok := pod.Annotations[flotillav1.AnnotationAtMostOnce]; ok {
		return true
	}
	// Two incarnations on one volume would both write to it.
	if len(Claims(&pod.Spec)) > 0 {
		return true
	}
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "StatefulSet"
}

// RecreatesOnVolumeClusterLoss says whether a pod chose to start on fresh, empty claims elsewhere
// rather than wait while the cluster that holds its data is unreachable.
func RecreatesOnVolumeClusterLoss(pod *corev1.Pod) bool {
	return pod.Annotations[flotillav1.AnnotationOnVolumeClusterLoss] == flotillav1.OnVolumeClusterLossRecreate
}

// kubeletConditions are the pod conditions a kubelet owns; the proxy's other conditions
// (PodScheduled by the primary's scheduler, DisruptionTarget, readiness gates) are kept.
var kubeletConditions = map[corev1.PodConditionType]bool{
	corev1.PodReadyToStartContainers: true, corev1.PodInitialized: true,
	corev1.ContainersReady: true, corev1.PodReady: true,
}

// ProxyStatus is the proxy's status with the delegate's grafted on. With flat networking the
// delegate's IPs are reported; isolated (the default) leaves them out, since the primary cannot
// reach them (and pod CIDRs of clusters overlap). A terminal proxy is never changed again.
func ProxyStatus(proxy, delegate *corev1.Pod, flatNetwork bool) corev1.PodStatus {
	st := *proxy.Status.DeepCopy()
	if Terminal(proxy) {
		return st
	}
	ds := delegate.Status
	st.Phase, st.Reason, st.Message = ds.Phase, ds.Reason, ds.Message
	st.StartTime = ds.StartTime.DeepCopy()
	st.InitContainerStatuses = deepCopyStatuses(ds.InitContainerStatuses)
	st.ContainerStatuses = deepCopyStatuses(ds.ContainerStatuses)
	st.EphemeralContainerStatuses = deepCopyStatuses(ds.EphemeralContainerStatuses)
	var conditions []corev1.PodCondition
	for _, c := range proxy.Status.Conditions {
		if !kubeletConditions[c.Type] {
			conditions = append(conditions, c)
		}
	}
	for _, c := range ds.Conditions {
		if kubeletConditions[c.Type] {
			conditions = append(conditions, c)
		}
	}
	st.Conditions = conditions
	if flatNetwork {
		st.PodIP, st.PodIPs = ds.PodIP, append([]corev1.PodIP(nil), ds.PodIPs...)
	} else {
		st.PodIP, st.PodIPs = "", nil
	}
	st.HostIP, st.HostIPs = "", nil
	return st
}

// Terminal says whether a pod has finished (Succeeded or Failed): it is never resurrected.
func Terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// StatusEqual compares two statuses ignoring nothing but order-insensitive noise.
func StatusEqual(a, b corev1.PodStatus) bool { return equality.Semantic.DeepEqual(a, b) }

func deepCopyStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// RemoteEphemeral says whether a volume is a generic ephemeral volume of class flotilla: its claim
// follows the pod, and goes with it.
func RemoteEphemeral(v corev1.Volume) bool {
	if v.Ephemeral == nil || v.Ephemeral.VolumeClaimTemplate == nil {
		return false
	}
	c := v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName
	return c != nil && *c == flotillav1.StorageClassRemote
}

// RemoteClaim says whether a claim of the primary is of class flotilla: its data follows its pods.
func RemoteClaim(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName == flotillav1.StorageClassRemote
}

// RealClaimOf says whether a claim of a secondary is this primary's real claim of the primary
// claim pvc: its label names this primary and its annotation the primary claim's UID.
func RealClaimOf(real, pvc *corev1.PersistentVolumeClaim, primaryID string) bool {
	return real.Labels[flotillav1.LabelPrimary] == primaryID && real.Annotations[flotillav1.AnnotationClaimUID] == string(pvc.UID)
}

// EphemeralClaimName is the name of the claim Kubernetes makes for a pod's generic ephemeral volume.
func EphemeralClaimName(pod, volume string) string { return pod + "-" + volume }

// VolumeClaims are the names of the claims a pod's volumes use, its ephemeral ones of class
// flotilla included.
func VolumeClaims(pod *corev1.Pod) []string {
	out := Claims(&pod.Spec)
	for _, v := range pod.Spec.Volumes {
		if RemoteEphemeral(v) {
			out = append(out, EphemeralClaimName(pod.Name, v.Name))
		}
	}
	return out
}

// Claims are the names of the PersistentVolumeClaims a pod's volumes use.
func Claims(spec *corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}
