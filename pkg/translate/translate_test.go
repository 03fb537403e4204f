package translate

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func proxy() *corev1.Pod {
	c := Constraints{NodeSelector: map[string]string{"disk": "ssd"}, HostPorts: map[string]int32{"web/80/TCP": 8080},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}}
	raw, _ := json.Marshal(c)
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "demo", UID: "proxy-uid",
			Labels:          map[string]string{"app": "web", flotillav1.LabelProxy: "true"},
			Annotations:     map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationDelegateConstraints: string(raw), "team": "a"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &yes}},
			Finalizers:      []string{flotillav1.FinalizerDelegate}},
		Spec: corev1.PodSpec{
			NodeName: "flotilla-eu", Priority: new(int32), SchedulingGates: []corev1.PodSchedulingGate{{Name: "g"}},
			Tolerations: []corev1.Toleration{{Key: flotillav1.TaintVirtualNode, Operator: corev1.TolerationOpExists}},
			Volumes: []corev1.Volume{
				{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			},
			Containers: []corev1.Container{{Name: "web", Image: "nginx",
				Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets"}, {Name: "config", MountPath: "/etc/cfg"}}}},
		},
	}
}

func TestDelegateIsAnAllowListCopy(t *testing.T) {
	d, err := Delegate(proxy(), "pid", Owner("pid", "fp-uid"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "web-1" || d.Namespace != "demo" || d.UID != "" || d.ResourceVersion != "" {
		t.Errorf("meta = %+v", d.ObjectMeta)
	}
	if d.Labels[flotillav1.LabelPrimary] != "pid" || d.Labels["app"] != "web" || d.Labels[flotillav1.LabelProxy] != "" {
		t.Errorf("labels = %v", d.Labels)
	}
	if d.Annotations[flotillav1.AnnotationProxyUID] != "proxy-uid" || d.Annotations["team"] != "a" {
		t.Errorf("annotations = %v", d.Annotations)
	}
	for k := range d.Annotations {
		if k != flotillav1.AnnotationProxyUID && len(k) > 12 && k[:12] == "flotilla.dev" {
			t.Errorf("annotation %s copied", k)
		}
	}
	if len(d.OwnerReferences) != 1 || d.OwnerReferences[0].Kind != "FlotillaPrimary" || *d.OwnerReferences[0].BlockOwnerDeletion {
		t.Errorf("owners = %+v", d.OwnerReferences)
	}
	if len(d.Finalizers) != 0 || d.Spec.NodeName != "" || d.Spec.Priority != nil || d.Spec.SchedulingGates != nil {
		t.Errorf("stripped fields kept: %+v", d.Spec)
	}
	if len(d.Spec.Volumes) != 1 || d.Spec.Volumes[0].Name != "config" || len(d.Spec.Containers[0].VolumeMounts) != 1 {
		t.Errorf("the primary's token volume was copied: %+v", d.Spec.Volumes)
	}
	env := d.Spec.Containers[0].Env[0]
	if env.Value != "" || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef.Name != "db" {
		t.Errorf("secret reference resolved or lost: %+v", env)
	}
	if d.Spec.NodeSelector["disk"] != "ssd" || d.Spec.Containers[0].Ports[0].HostPort != 8080 ||
		len(d.Spec.Tolerations) != 1 || d.Spec.Tolerations[0].Key != "dedicated" {
		t.Errorf("constraints not restored: %+v", d.Spec)
	}
	p := proxy()
	p.Annotations[flotillav1.AnnotationDelegateConstraints] = "{"
	if _, err := Delegate(p, "pid", Owner("pid", "x")); err == nil {
		t.Error("broken constraints accepted")
	}
}

func TestProxyStatus(t *testing.T) {
	p := proxy()
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}
	d := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}}, HostIP: "192.168.1.1",
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true}}}}
	st := ProxyStatus(p, d, false)
	if st.Phase != corev1.PodRunning || st.PodIP != "" || st.PodIPs != nil || st.HostIP != "" || st.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("isolated status = %+v", st)
	}
	types := map[corev1.PodConditionType]bool{}
	for _, c := range st.Conditions {
		if types[c.Type] {
			t.Errorf("condition %s twice", c.Type)
		}
		types[c.Type] = true
	}
	if !types[corev1.PodReady] || !types[corev1.DisruptionTarget] || !types[corev1.PodScheduled] || len(st.ContainerStatuses) != 1 {
		t.Errorf("conditions = %+v", st.Conditions)
	}
	if flat := ProxyStatus(p, d, true); flat.PodIP != "10.0.0.7" {
		t.Errorf("flat pod IP = %q", flat.PodIP)
	}
	p.Status.Phase = corev1.PodFailed
	if st := ProxyStatus(p, d, false); st.Phase != corev1.PodFailed {
		t.Error("a terminal proxy was resurrected")
	}
}

func TestDelegateOfAnAtMostOncePodSaysSo(t *testing.T) {
	yes := true
	sts := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "ns", UID: "u",
		OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "db", Controller: &yes}}}}
	d, err := Delegate(sts, "p", Owner("p", "o"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Annotations[flotillav1.AnnotationAtMostOnce]; !ok || !AtMostOnce(d) {
		t.Errorf("delegate annotations %v: the sweep could not tell it is at-most-once", d.Annotations)
	}
	rs := sts.DeepCopy()
	rs.OwnerReferences[0].Kind = "ReplicaSet"
	if d, _ := Delegate(rs, "p", Owner("p", "o")); AtMostOnce(d) {
		t.Error("a ReplicaSet pod's delegate is marked at-most-once")
	}
}

func TestImageUpdatesAreTheProxysChangedImagesByContainer(t *testing.T) {
	pod := func(init, app string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup", Image: init}},
			Containers:     []corev1.Container{{Name: "web", Image: app}, {Name: "side", Image: "envoy:1"}}}}
	}
	if got := ImageUpdates(pod("busybox:1", "nginx:1"), pod("busybox:1", "nginx:1")); got != nil {
		t.Errorf("no change: %v", got)
	}
	got := ImageUpdates(pod("busybox:2", "nginx:2"), pod("busybox:1", "nginx:1"))
	if len(got) != 2 || got["setup"] != "busybox:2" || got["web"] != "nginx:2" {
		t.Errorf("updates %v, want setup busybox:2 and web nginx:2", got)
	}
}

func TestDelegateCarriesThePriorityClassByNameOnly(t *testing.T) {
	prio := int32(1000)
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n"},
		Spec: corev1.PodSpec{PriorityClassName: "batch-high", Priority: &prio, Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	d, err := Delegate(proxy, "p1", Owner("p1", "u"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.PriorityClassName != "batch-high" || d.Spec.Priority != nil {
		t.Errorf("priorityClassName %q, priority %v: want the class by name, the value resolved in the secondary", d.Spec.PriorityClassName, d.Spec.Priority)
	}
}

func TestNewEphemeralContainersAreTheProxysTheDelegateLacks(t *testing.T) {
	ec := func(names ...string) []corev1.EphemeralContainer {
		var out []corev1.EphemeralContainer
		for _, n := range names {
			out = append(out, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: n, Image: "busybox"}})
		}
		return out
	}
	proxy := &corev1.Pod{Spec: corev1.PodSpec{EphemeralContainers: ec("debugger", "debugger-2")}}
	delegate := &corev1.Pod{Spec: corev1.PodSpec{EphemeralContainers: ec("debugger")}}
	got := NewEphemeralContainers(proxy, delegate)
	if len(got) != 1 || got[0].Name != "debugger-2" {
		t.Errorf("new = %v, want debugger-2 only", got)
	}
	if got := NewEphemeralContainers(delegate, delegate); got != nil {
		t.Errorf("nothing new: %v", got)
	}
}

func TestResourceUpdatesAreTheProxysResizedContainers(t *testing.T) {
	res := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	pod := func(app, side string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Resources: res("1")}},
			Containers:     []corev1.Container{{Name: "app", Resources: res(app)}, {Name: "side", Resources: res(side)}}}}
	}
	if got := ResourceUpdates(pod("100m", "50m"), pod("0.1", "50m")); got != nil {
		t.Errorf("same quantities written differently: %v", got)
	}
	resized := pod("200m", "50m")
	resized.Spec.InitContainers[0].Resources = res("2") // not resized in place
	got := ResourceUpdates(resized, pod("100m", "50m"))
	cpu := got["app"].Requests[corev1.ResourceCPU]
	if len(got) != 1 || cpu.String() != "200m" {
		t.Errorf("updates %v, want app's cpu request 200m only", got)
	}
}

// Pod-level resources (a pod's whole budget, shared by its containers) size the delegate as they
// size the proxy.
func TestDelegateCarriesPodLevelResources(t *testing.T) {
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}},
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}
	d, err := Delegate(proxy, "p", Owner("p", "o"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Resources == nil || d.Spec.Resources.Limits.Cpu().String() != "2" {
		t.Fatalf("pod-level resources: %+v", d.Spec.Resources)
	}
	if d.Spec.Resources == proxy.Spec.Resources {
		t.Fatal("shared with the proxy, not copied")
	}
}
