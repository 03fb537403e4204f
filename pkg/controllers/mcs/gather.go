package mcs

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/mcs"
)

// The registry's watches this controller reads secondaries through: every ServiceExport and
// Service, and every EndpointSlice of a Service (any of them may be exported, and a Service's own
// EndpointSlices are its endpoints; an import's carry its derived Service's name), and the
// ServiceImports this primary wrote.
var (
	exportsWatch  = clusters.Watch{Name: "mcs serviceexports", Object: &mcsv1beta1.ServiceExport{}, Selector: func(string) string { return "" }}
	servicesWatch = clusters.Watch{Name: "mcs services", Object: &corev1.Service{}, Selector: func(string) string { return "" },
		Transform: slimService}
	slicesWatch = clusters.Watch{Name: "mcs endpointslices", Object: &discoveryv1.EndpointSlice{}, Selector: func(string) string { return discoveryv1.LabelServiceName },
		Transform: slimSlice}
	importsWatch = clusters.Watch{Name: "mcs serviceimports", Object: &mcsv1beta1.ServiceImport{},
		Selector: func(id string) string { return flotillav1.LabelPrimary + "=" + id }}
	// namespacesWatch: the namespaces a secondary's admin opened to this primary (or Flotilla
	// made), the only ones whose exports count and where imports are written.
	namespacesWatch = clusters.Watch{Name: "mcs namespaces", Object: &corev1.Namespace{},
		Selector: func(id string) string { return flotillav1.LabelManagedBy + "=" + id }}
)

// Watches are the registry's watches this controller reads secondaries through.
var Watches = []clusters.Watch{exportsWatch, servicesWatch, slicesWatch, importsWatch, namespacesWatch}

// clusterView is what one cluster holds of one exported name.
type clusterView struct {
	name    string
	primary bool
	client  client.Client
	// known: the cluster answers and its caches are complete; only then may anything be
	// concluded from what is missing in it, or written to it.
	known bool
	// downFor is how long a secondary that is not known has not answered.
	downFor time.Duration
	// opened: a secondary's namespace of the name is labelled managed-by this primary (its admin
	// opened it, or Flotilla made it). Elsewhere its exports do not count, and nothing is written.
	opened bool
	// denied: the namespace may not use this secondary (its ClusterSetBindings), why. Its exports
	// there do not count, and nothing of the import is there.
	denied string

	export  *mcsv1beta1.ServiceExport
	service *corev1.Service
	// sources are the Service's own EndpointSlices; ours are those this primary wrote for the
	// import of the name.
	sources, ours []*discoveryv1.EndpointSlice
	imported      *mcsv1beta1.ServiceImport
	derived       *corev1.Service
}

// gather reads every cluster's view of namespace/name: the primary's from the manager's cache,
// each secondary's from the registry's watches.
func (r *Reconciler) gather(ctx context.Context, key client.ObjectKey) ([]*clusterView, error) {
	p, err := r.primaryView(ctx, key)
	if err != nil {
		return nil, err
	}
	views := []*clusterView{p}
	var denied map[string]string
	if r.Tenancy != nil {
		if denied, err = r.Tenancy.Denied(ctx, key.Namespace); err != nil {
			return nil, fmt.Errorf("reading the cluster sets of namespace %s: %w", key.Namespace, err)
		}
	}
	now := r.Clock.Now()
	for _, snap := range r.Registry.Snapshots() {
		// A cluster that has not answered since the manager started has no role yet: it may be
		// a silent secondary, whose exports the primary's import remembers.
		if snap.Role == clusters.RolePrimary || snap.Name == r.PrimaryName || r.Registry.Removed(snap.Name) {
			continue
		}
		v := &clusterView{name: snap.Name, denied: denied[snap.Name]}
		views = append(views, v)
		sec, ok := r.Registry.Secondary(snap.Name)
		if !ok || !sec.Running {
			v.downFor = now.Sub(snap.LastTransition)
			continue
		}
		v.client = sec.Client
		v.known = secondaryView(sec, key, v, r.Registry.PrimaryID())
	}
	return views, nil
}

func (r *Reconciler) primaryView(ctx context.Context, key client.ObjectKey) (*clusterView, error) {
	v := &clusterView{name: r.PrimaryName, primary: true, client: r.Client, known: true}
	get := func(k client.ObjectKey, obj client.Object) (bool, error) {
		switch err := r.Client.Get(ctx, k, obj); {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading %T %s in the primary: %w", obj, k, err)
		}
		return true, nil
	}
	var export mcsv1beta1.ServiceExport
	var svc, derived corev1.Service
	var imp mcsv1beta1.ServiceImport
	for _, g := range []struct {
		key client.ObjectKey
		obj client.Object
		set func()
	}{
		{key, &export, func() { v.export = &export }},
		{key, &svc, func() { v.service = &svc }},
		{key, &imp, func() { v.imported = &imp }},
		{client.ObjectKey{Namespace: key.Namespace, Name: mcs.DerivedServiceName(key.Name)}, &derived, func() { v.derived = &derived }},
	} {
		ok, err := get(g.key, g.obj)
		if err != nil {
			return nil, err
		}
		if ok {
			g.set()
		}
	}
	var slices discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &slices, client.InNamespace(key.Namespace)); err != nil {
		return nil, fmt.Errorf("listing EndpointSlices of %s in the primary: %w", key, err)
	}
	for i := range slices.Items {
		sortSlice(v, key.Name, &slices.Items[i], r.Registry.PrimaryID())
	}
	return v, nil
}

// secondaryView fills v from the secondary's caches; false while one of them is not complete.
func secondaryView(sec clusters.Secondary, key client.ObjectKey, v *clusterView, primaryID string) bool {
	byKey := func(w clusters.Watch, k string) (any, bool) {
		store, _, synced := sec.Cached(w)
		if !synced {
			return nil, false
		}
		obj, _, _ := store.GetByKey(k)
		return obj, true
	}
	k := key.Namespace + "/" + key.Name
	e, ok1 := byKey(exportsWatch, k)
	s, ok2 := byKey(servicesWatch, k)
	i, ok3 := byKey(importsWatch, k)
	d, ok4 := byKey(servicesWatch, key.Namespace+"/"+mcs.DerivedServiceName(key.Name))
	n, ok6 := byKey(namespacesWatch, key.Namespace)
	store, _, ok5 := sec.Cached(slicesWatch)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return false
	}
	v.opened = n != nil
	v.export, _ = e.(*mcsv1beta1.ServiceExport)
	v.service, _ = s.(*corev1.Service)
	v.imported, _ = i.(*mcsv1beta1.ServiceImport)
	v.derived, _ = d.(*corev1.Service)
	objs, err := store.ByIndex(cache.NamespaceIndex, key.Namespace)
	if err != nil {
		return false
	}
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			sortSlice(v, key.Name, s, primaryID)
		}
	}
	return true
}

// sortSlice files an EndpointSlice of the namespace as one of the Service's own or one of ours.
func sortSlice(v *clusterView, name string, s *discoveryv1.EndpointSlice, primaryID string) {
	l := s.Labels
	switch {
	case l[discoveryv1.LabelManagedBy] == mcs.ManagedBy && l[mcsv1beta1.LabelServiceName] == name && l[flotillav1.LabelPrimary] == primaryID:
		v.ours = append(v.ours, s)
	case l[discoveryv1.LabelServiceName] == name && l[discoveryv1.LabelManagedBy] != mcs.ManagedBy:
		v.sources = append(v.sources, s)
	}
}

// slimService is what the cache keeps of a secondary's Service: every Service is cached (any may
// be exported), so one that is not Flotilla's keeps only what an export reads (its name, type,
// addresses, ports, affinity and traffic policies): no annotations (a last-applied-configuration
// can be most of it), selector, owners or status. Flotilla's (derived Services) stay whole, as
// their apply ledger compares them.
func slimService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	if s.Labels[flotillav1.LabelPrimary] == "" {
		s.Annotations, s.OwnerReferences, s.Finalizers = nil, nil, nil
		s.Spec.Selector, s.Spec.ExternalIPs, s.Spec.LoadBalancerSourceRanges = nil, nil, nil
		s.Status = corev1.ServiceStatus{}
	}
	return s, nil
}

// slimSlice is what the cache keeps of a secondary's EndpointSlice: one that is not Flotilla's
// keeps its endpoints' addresses, conditions, hostname and zone (what an import mirrors) and its
// ports; never its pods' and nodes' names, hints, annotations or owners.
func slimSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	if s.Labels[flotillav1.LabelPrimary] == "" {
		s.Annotations, s.OwnerReferences = nil, nil
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			e.TargetRef, e.NodeName, e.Hints, e.DeprecatedTopology = nil, nil, nil, nil
		}
	}
	return s, nil
}
