package mcs

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/mcs"
)

func TestDecide(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "hello"}
	http := "http"
	exported := func(name string, known bool, down time.Duration) *clusterView {
		v := &clusterView{name: name, primary: name == "primary", known: known, downFor: down, opened: known}
		if known {
			v.export = &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "hello"}}
			v.service = &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
			v.sources = []*discoveryv1.EndpointSlice{{ObjectMeta: metav1.ObjectMeta{Name: name + "-x"}, AddressType: discoveryv1.AddressTypeIPv4,
				Ports: []discoveryv1.EndpointPort{{Name: &http}}, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}}
		}
		return v
	}
	listing := func(v *clusterView, clusters ...string) *clusterView {
		v.imported = &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{flotillav1.LabelPrimary: "id"}}}
		for _, c := range clusters {
			v.imported.Status.Clusters = append(v.imported.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: c})
		}
		return v
	}
	silentPrimary := func() *clusterView { return &clusterView{name: "primary", primary: true, known: true} }
	closed := func(v *clusterView) *clusterView { v.opened = false; return v }
	denied := func(v *clusterView) *clusterView {
		v.denied = "not in the ClusterSets bound to namespace shop (europe)"
		return v
	}
	tests := map[string]struct {
		key                   client.ObjectKey
		views                 []*clusterView
		nothing, keepImport   bool
		forbidden             bool
		members, keep, slices []string // slices: their source clusters
		recheck               time.Duration
	}{
		"no export anywhere and nothing of ours: none of ours": {views: []*clusterView{silentPrimary(), {name: "s1", known: true}}, nothing: true},
		"two exporters: both members, a slice each": {
			views:   []*clusterView{exported("primary", true, 0), exported("s1", true, 0)},
			members: []string{"primary", "s1"}, slices: []string{"primary", "s1"}},
		"a silent exporter within the bound: kept, with a recheck at the bound": {
			views:   []*clusterView{listing(exported("primary", true, 0), "primary", "s2"), exported("s2", false, 2*time.Second)},
			members: []string{"primary", "s2"}, keep: []string{"s2"}, slices: []string{"primary"}, recheck: 3 * time.Second},
		"a silent exporter past the bound: still a member, its slices withdrawn": {
			views:   []*clusterView{listing(exported("primary", true, 0), "primary", "s2"), exported("s2", false, time.Minute)},
			members: []string{"primary", "s2"}, slices: []string{"primary"}},
		"the only exporter silent (a restarted manager cannot read it): the import stays": {
			views:   []*clusterView{listing(silentPrimary(), "s2"), exported("s2", false, time.Second)},
			members: []string{"s2"}, keep: []string{"s2"}, keepImport: true, recheck: 4 * time.Second},
		"a secondary's export in a namespace its admin did not open is no member": {
			views:   []*clusterView{exported("primary", true, 0), closed(exported("s1", true, 0))},
			members: []string{"primary"}, slices: []string{"primary"}},
		"an export in a cluster the namespace may not use (its cluster sets) is no member": {
			views:   []*clusterView{exported("primary", true, 0), denied(exported("s1", true, 0))},
			members: []string{"primary"}, slices: []string{"primary"}},
		"only an unopened namespace's export: no import": {
			views: []*clusterView{silentPrimary(), closed(exported("s1", true, 0))}},
		"a name in kube-system: nothing imported": {
			key:   client.ObjectKey{Namespace: "kube-system", Name: "hello"},
			views: []*clusterView{exported("primary", true, 0), exported("s1", true, 0)}, forbidden: true},
		"a name in flotilla-system: nothing imported": {
			key:   client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: "hello"},
			views: []*clusterView{exported("primary", true, 0)}, forbidden: true},
		"a silent cluster the import does not list is no member": {
			views:   []*clusterView{exported("primary", true, 0), exported("s2", false, time.Second)},
			members: []string{"primary"}, slices: []string{"primary"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			k := key
			if tc.key.Name != "" {
				k = tc.key
			}
			p := decide(k, tc.views, 5*time.Second)
			var sources []string
			for _, s := range p.slices {
				sources = append(sources, s.Labels[mcsv1beta1.LabelSourceCluster])
			}
			for _, v := range tc.views {
				if v.denied != "" && v.export != nil && p.merged.Verdicts[v.name].InvalidReason != mcs.ReasonNamespaceDenied {
					t.Errorf("the export in %s, a cluster its namespace may not use: %+v", v.name, p.merged.Verdicts[v.name])
				}
			}
			if p.forbidden != tc.forbidden || p.nothing != tc.nothing || p.keepImport != tc.keepImport || !slices.Equal(p.members, tc.members) ||
				!slices.Equal(p.keep, tc.keep) || !slices.Equal(sources, tc.slices) || p.recheckIn != tc.recheck {
				t.Errorf("plan: forbidden %v nothing %v keepImport %v members %v keep %v slices %v recheck %s", p.forbidden, p.nothing, p.keepImport, p.members, p.keep, sources, p.recheckIn)
			}
		})
	}
}

// No import is written in a cluster the namespace may not use: not even its namespace is made.
func TestApplyWritesNothingWhereTheNamespaceIsDenied(t *testing.T) {
	r := &Reconciler{}
	p := decide(client.ObjectKey{Namespace: "shop", Name: "hello"}, []*clusterView{{name: "primary", primary: true, known: true,
		export:  &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "hello"}},
		service: &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}}}, 5*time.Second)
	if p.merged.Spec == nil {
		t.Fatal("the primary's export makes no import")
	}
	v := &clusterView{name: "s1", known: true, denied: "not in the ClusterSets bound to namespace shop (europe)"} // no client: a write would panic
	if err := r.applyTo(t.Context(), client.ObjectKey{Namespace: "shop", Name: "hello"}, v, p); err != nil {
		t.Fatal(err)
	}
}
