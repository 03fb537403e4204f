package delegates

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// secondarysDelegate is a delegate as a secondary's API server returns it: what Flotilla sent,
// and what the secondary added (token volume, tolerations, defaults, its status).
func secondarysDelegate() *corev1.Pod {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	container := func(name, image string) corev1.Container {
		return corev1.Container{Name: name, Image: image, Resources: res, Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
			Ports:                  []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			VolumeMounts:           []corev1.VolumeMount{{Name: "kube-api-access-x1", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			TerminationMessagePath: "/dev/termination-log", ImagePullPolicy: corev1.PullIfNotPresent}
	}
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("proxy", "envoy:1")
	sidecar.RestartPolicy = &always
	seconds := int64(300)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-1", UID: "d1", ResourceVersion: "42",
			Labels:          map[string]string{flotillav1.LabelPrimary: "p"},
			Annotations:     map[string]string{flotillav1.AnnotationProxyUID: "proxy-1", flotillav1.AnnotationAtMostOnce: ""},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "flotilla.dev/v1alpha1", Kind: "FlotillaPrimary", Name: "p", UID: "o1"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "flotilla", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec: corev1.PodSpec{
			NodeName:            "worker-1",
			ResourceClaims:      []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
			InitContainers:      []corev1.Container{sidecar},
			Containers:          []corev1.Container{container("app", "web:1"), container("log", "fluent:1")},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}}},
			Volumes: []corev1.Volume{{Name: "kube-api-access-x1", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds}},
			DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler", ServiceAccountName: "default",
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", HostIP: "192.168.0.2",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "web:1"}, {Name: "log", Ready: true, Image: "fluent:1"}}},
	}
}

func TestSlimDelegateKeepsEverythingFlotillaReadsAndDecides(t *testing.T) {
	full := secondarysDelegate()
	obj, err := slim(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*corev1.Pod)
	if slim.ManagedFields != nil || slim.Spec.Volumes != nil || slim.Spec.Tolerations != nil || slim.Spec.Containers[0].Env != nil ||
		slim.Spec.Containers[0].VolumeMounts != nil || slim.Spec.EphemeralContainers[0].Image != "" {
		t.Errorf("the cache keeps what nothing reads: %+v", slim.Spec)
	}
	if !equality.Semantic.DeepEqual(slim.ObjectMeta, withoutManagedFields(full.ObjectMeta)) || !equality.Semantic.DeepEqual(slim.Status, full.Status) ||
		slim.Spec.NodeName != full.Spec.NodeName || !equality.Semantic.DeepEqual(slim.Spec.ResourceClaims, full.Spec.ResourceClaims) {
		t.Error("the delegate's metadata, status, node or claims changed in the cache")
	}

	// A proxy that asks each change Flotilla carries: a new image, a resize, a new ephemeral container.
	proxy := full.DeepCopy()
	proxy.UID = "proxy-1"
	proxy.Status = corev1.PodStatus{Phase: corev1.PodPending}
	proxy.Spec.InitContainers[0].Image = "envoy:2"
	proxy.Spec.Containers[0].Image = "web:2"
	proxy.Spec.Containers[1].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}
	proxy.Spec.EphemeralContainers = append(proxy.Spec.EphemeralContainers,
		corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger-2", Image: "busybox"}})

	same := func(what string, a, b any) {
		t.Helper()
		if !equality.Semantic.DeepEqual(a, b) {
			t.Errorf("%s differs on the cached delegate:\n full %+v\n slim %+v", what, a, b)
		}
	}
	same("ImageUpdates", translate.ImageUpdates(proxy, full), translate.ImageUpdates(proxy, slim))
	same("ResourceUpdates", translate.ResourceUpdates(proxy, full), translate.ResourceUpdates(proxy, slim))
	same("NewEphemeralContainers", translate.NewEphemeralContainers(proxy, full), translate.NewEphemeralContainers(proxy, slim))
	same("ProxyStatus", translate.ProxyStatus(proxy, full, true), translate.ProxyStatus(proxy, slim, true))
	same("AtMostOnce", translate.AtMostOnce(full), translate.AtMostOnce(slim))
	if len(translate.ImageUpdates(proxy, slim)) != 2 || len(translate.ResourceUpdates(proxy, slim)) != 1 || len(translate.NewEphemeralContainers(proxy, slim)) != 1 {
		t.Fatal("the proxy's changes were not all seen")
	}

	// The patch that carries each change, made on the cached delegate, is the one made on the whole.
	changes := map[string]func(d *corev1.Pod){
		"image": func(d *corev1.Pod) {
			d.Spec.InitContainers[0].Image = "envoy:2"
			d.Spec.Containers[0].Image = "web:2"
		},
		"resize": func(d *corev1.Pod) { d.Spec.Containers[1].Resources = proxy.Spec.Containers[1].Resources },
		"ephemeral": func(d *corev1.Pod) {
			d.Spec.EphemeralContainers = append(d.Spec.EphemeralContainers, translate.NewEphemeralContainers(proxy, slim)...)
		},
	}
	for name, change := range changes {
		same("the "+name+" patch", patchOf(t, full, change), patchOf(t, slim, change))
	}
}

func withoutManagedFields(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.ManagedFields = nil
	return m
}

// patchOf is the strategic-merge patch, under optimistic lock, that makes change on base.
func patchOf(t *testing.T, base *corev1.Pod, change func(*corev1.Pod)) map[string]any {
	t.Helper()
	changed := base.DeepCopy()
	change(changed)
	data, err := client.StrategicMergeFrom(base, client.MergeFromWithOptimisticLock{}).Data(changed)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
