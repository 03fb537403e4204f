package quota

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

var key = seal.Key("0123456789abcdef0123456789abcdef")

// proxy is an elected pod as the webhook leaves it in a namespace with a quota: gated, waiting,
// allowed clusters a and b, sealed.
func proxy(name string, age time.Duration, edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age)),
		Labels:            map[string]string{flotillav1.LabelProxy: "true"},
		Annotations:       map[string]string{flotillav1.AnnotationQuota: flotillav1.QuotaWaiting}},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: flotillav1.SchedulingGateQuota}},
			Affinity:   translate.ClusterAffinity([]string{"a", "b"}),
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	if edit != nil {
		edit(p)
	}
	p.Annotations[flotillav1.AnnotationSeal] = seal.Stamp(key, p)
	return p
}

func admittedIn(cluster string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Annotations[flotillav1.AnnotationQuota] = flotillav1.QuotaAdmitted
		p.Spec.SchedulingGates = nil
		p.Spec.NodeName = flotillav1.VirtualNodeName(cluster)
	}
}

func quotaOf(hard corev1.ResourceList, perCluster ...flotillav1.ClusterQuota) *flotillav1.FleetQuota {
	return &flotillav1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "fleet", Generation: 1},
		Spec: flotillav1.FleetQuotaSpec{Hard: hard, Clusters: perCluster}}
}

// stale is a client whose pod lists return what they returned first (a cache that has not seen
// this controller's writes yet), the client itself, and a refresh of the lists.
func stale(objs ...client.Object) (client.WithWatch, client.WithWatch, func()) {
	var frozen *corev1.PodList
	truth := fake.NewClientBuilder().WithScheme(clusters.NewScheme()).WithObjects(objs...).
		WithStatusSubresource(&flotillav1.FleetQuota{}).Build()
	c := interceptor.NewClient(truth, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		err := c.Get(ctx, key, obj, opts...)
		if p, ok := obj.(*corev1.Pod); ok {
			p.Spec.Affinity = nil // as the manager's cache keeps a proxy
		}
		return err
	}, List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		pods, ok := list.(*corev1.PodList)
		if !ok || frozen == nil {
			err := c.List(ctx, list, opts...)
			if ok && err == nil && frozen == nil {
				frozen = pods.DeepCopy()
			}
			return err
		}
		frozen.DeepCopyInto(pods)
		return nil
	}})
	return c, truth, func() { frozen = nil }
}

func podsOf(t *testing.T, c client.Client) (admitted, waiting []corev1.Pod) {
	var pods corev1.PodList
	if err := c.List(t.Context(), &pods); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Annotations[flotillav1.AnnotationQuota] == flotillav1.QuotaWaiting {
			waiting = append(waiting, p)
		} else {
			admitted = append(admitted, p)
		}
	}
	return admitted, waiting
}

// Oldest first, up to the limit; the rest wait saying why, and a pass on a cache that has not
// seen the admissions admits no more. Room freed: the next oldest goes.
func TestAdmitsUpToTheLimitOldestFirst(t *testing.T) {
	objs := []client.Object{quotaOf(corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}),
		proxy("running", 10*time.Minute, admittedIn("a"))}
	for i := range 4 {
		objs = append(objs, proxy(fmt.Sprintf("p%d", i), time.Duration(4-i)*time.Minute, nil))
	}
	c, truth, refresh := stale(objs...)
	r := &Reconciler{Client: c, Live: truth, SealKey: key}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: "team"}}
	for range 2 { // the second pass reads the same stale list
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	admitted, waiting := podsOf(t, truth)
	if len(admitted) != 3 || len(waiting) != 2 {
		t.Fatalf("%d admitted, %d waiting; want 3 and 2", len(admitted), len(waiting))
	}
	for _, p := range admitted {
		if p.Name != "running" && p.Name != "p0" && p.Name != "p1" {
			t.Errorf("admitted %s before older pods", p.Name)
		}
		if len(p.Spec.SchedulingGates) != 0 || seal.Verify(key, &p) != nil {
			t.Errorf("admitted %s: gates %v, seal %v", p.Name, p.Spec.SchedulingGates, seal.Verify(key, &p))
		}
	}
	for _, p := range waiting {
		if why := p.Annotations[flotillav1.AnnotationQuotaExceeded]; why != "FleetQuota fleet: pods 3/3 used, the pod asks for 1" {
			t.Errorf("%s waits because %q", p.Name, why)
		}
		if seal.Verify(key, &p) != nil {
			t.Errorf("saying why %s waits broke its seal", p.Name)
		}
	}
	var q flotillav1.FleetQuota
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "team", Name: "fleet"}, &q); err != nil {
		t.Fatal(err)
	}
	if q.Status.Summary != "pods 3/3" || q.Status.Waiting != 2 || !meta.IsStatusConditionTrue(q.Status.Conditions, flotillav1.ConditionExhausted) {
		t.Errorf("status %+v", q.Status)
	}

	refresh()
	if err := c.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "running"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if admitted, waiting := podsOf(t, truth); len(admitted) != 3 || len(waiting) != 1 || waiting[0].Name != "p3" {
		t.Errorf("after one pod went: %d admitted, waiting %v", len(admitted), waiting)
	}
}

// With a limit per cluster, each pod is admitted to one cluster (its affinity narrowed), the
// overflow to the other.
func TestPerClusterLimitsSendTheOverflowToTheOtherCluster(t *testing.T) {
	objs := []client.Object{quotaOf(nil, flotillav1.ClusterQuota{Name: "a", Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
		flotillav1.ClusterQuota{Name: "b", Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}})}
	for i := range 4 {
		objs = append(objs, proxy(fmt.Sprintf("p%d", i), time.Duration(4-i)*time.Minute, nil))
	}
	c, truth, _ := stale(objs...)
	r := &Reconciler{Client: c, Live: truth, SealKey: key}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	admitted, waiting := podsOf(t, truth)
	in := map[string]int{}
	for _, p := range admitted {
		allowed := seal.AllowedClusters(&p)
		if len(allowed) != 1 {
			t.Fatalf("%s admitted to %v, not one cluster", p.Name, allowed)
		}
		in[allowed[0]]++
		if terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 1 ||
			len(terms[0].MatchExpressions) != 2 || len(terms[0].MatchExpressions[0].Values) != 2 {
			t.Errorf("%s: its affinity was not kept and narrowed by one expression (Kubernetes allows only additions): %+v", p.Name, terms)
		}
	}
	if in["a"] != 1 || in["b"] != 2 || len(waiting) != 1 || !strings.Contains(waiting[0].Annotations[flotillav1.AnnotationQuotaExceeded], "FleetQuota fleet in a: pods 1/1") {
		t.Errorf("admitted %v, waiting %d: %v", in, len(waiting), waiting)
	}
	var q flotillav1.FleetQuota
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "team", Name: "fleet"}, &q); err != nil {
		t.Fatal(err)
	}
	if len(q.Status.Clusters) != 2 || q.Status.Clusters[0].Used.Pods().String() != "1" || q.Status.Clusters[1].Used.Pods().String() != "2" {
		t.Errorf("per-cluster status %+v", q.Status.Clusters)
	}
}

// Without a quota (deleted), every waiting proxy goes.
func TestNoQuotaAdmitsEveryWaitingProxy(t *testing.T) {
	c, truth, _ := stale(proxy("p0", time.Minute, nil), proxy("p1", time.Minute, nil))
	r := &Reconciler{Client: c, Live: truth, SealKey: key}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	if admitted, waiting := podsOf(t, truth); len(admitted) != 2 || len(waiting) != 0 {
		t.Errorf("%d admitted, %d waiting", len(admitted), len(waiting))
	}
}

// A proxy the webhook did not seal is never admitted.
func TestAnUnsealedProxyIsNotAdmitted(t *testing.T) {
	forged := proxy("forged", time.Minute, nil)
	forged.Annotations[flotillav1.AnnotationSeal] = "v1.n.a,b.AAAA"
	c, truth, _ := stale(forged)
	r := &Reconciler{Client: c, Live: truth, SealKey: key}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	if _, waiting := podsOf(t, truth); len(waiting) != 1 {
		t.Error("an unsealed proxy was admitted")
	}
}

// Claims of class flotilla count their storage once: a pod whose new claim would pass the limit
// waits, one that uses a claim already counted does not add it again.
func TestClaimsCountTheirStorageOnce(t *testing.T) {
	claim := func(name, size, cluster string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(flotillav1.StorageClassRemote),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
		if cluster != "" {
			c.Annotations = map[string]string{flotillav1.AnnotationVolumeCluster: cluster}
		}
		return c
	}
	using := func(claims ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for _, c := range claims {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
			}
		}
	}
	running := func(p *corev1.Pod) { admittedIn("a")(p); using("data-0")(p) }
	other := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "local"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}}}}
	c, truth, _ := stale(quotaOf(corev1.ResourceList{"requests.storage": resource.MustParse("3Gi")}),
		claim("data-0", "2Gi", ""), claim("data-1", "2Gi", ""), other,
		proxy("running", 10*time.Minute, running), proxy("p0", 5*time.Minute, using("data-1")), proxy("p1", time.Minute, using("data-0", "local")))
	r := &Reconciler{Client: c, Live: truth, SealKey: key}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	_, waiting := podsOf(t, truth)
	if len(waiting) != 1 || waiting[0].Name != "p0" ||
		waiting[0].Annotations[flotillav1.AnnotationQuotaExceeded] != "FleetQuota fleet: requests.storage 2Gi/3Gi used, the pod asks for 2Gi" {
		t.Errorf("waiting %v", waiting)
	}
	var q flotillav1.FleetQuota
	if err := truth.Get(t.Context(), client.ObjectKey{Namespace: "team", Name: "fleet"}, &q); err != nil {
		t.Fatal(err)
	}
	if q.Status.Summary != "requests.storage 2Gi/3Gi" {
		t.Errorf("summary %q: the claim used by two pods counts once, a claim of another class not at all", q.Status.Summary)
	}
}
