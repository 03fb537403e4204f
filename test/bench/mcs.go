package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/flotilla-dev/flotilla/test/testbed"
)

// MCSResult is the Multi-Cluster Services run: a name exported by every cluster of the set, its
// endpoints made ready at once, then changed one at a time.
type MCSResult struct {
	Clusters  int `json:"clusters"`
	Endpoints int `json:"endpoints"`
	// AllImportedSeconds is from the moment the exporting clusters' EndpointSlices were written
	// (the last write) to the moment every cluster's import holds every endpoint.
	AllImportedSeconds       float64 `json:"allImportedSeconds"`
	TargetAllImportedSeconds float64 `json:"targetAllImportedSeconds"`
	// One endpoint made not ready (then ready again) in one cluster, until every other cluster's
	// import shows it: p50 and p90 over the changes.
	Changes               int     `json:"changes"`
	ChangeP50Millis       float64 `json:"changeP50Millis"`
	ChangeP90Millis       float64 `json:"changeP90Millis"`
	TargetChangeP50Millis float64 `json:"targetChangeP50Millis"`
}

// benchScheme knows the core kinds and the MCS API's.
var benchScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(mcsv1beta1.Install(s))
	return s
}()

const (
	mcsNamespace = "bench-mcs"
	mcsName      = "svc"
	// perSlice is what Kubernetes' EndpointSlice controller puts in one slice at most.
	perSlice = 100
)

// importWatch counts, per cluster, the ready endpoints of the import's EndpointSlices and, per
// address, whether it is there, from watch events.
type importWatch struct {
	mu      sync.Mutex
	present []map[string]bool // per cluster: address -> in an import slice
	slices  []map[string][]string
	changed chan struct{}
}

func (w *importWatch) handler(i int) cache.ResourceEventHandlerFuncs {
	set := func(obj any, deleted bool) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
				s, ok = d.Obj.(*discoveryv1.EndpointSlice)
			}
			if !ok {
				return
			}
		}
		var addrs []string
		if !deleted {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					addrs = append(addrs, e.Addresses...)
				}
			}
		}
		w.mu.Lock()
		for _, a := range w.slices[i][s.Name] {
			delete(w.present[i], a)
		}
		w.slices[i][s.Name] = addrs
		for _, a := range addrs {
			w.present[i][a] = true
		}
		w.mu.Unlock()
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { set(o, false) },
		UpdateFunc: func(_, o any) { set(o, false) },
		DeleteFunc: func(o any) { set(o, true) },
	}
}

// waitFor waits until cond holds of the per-cluster address sets.
func (w *importWatch) waitFor(ctx context.Context, timeout time.Duration, cond func(present []map[string]bool) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		w.mu.Lock()
		ok := cond(w.present)
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.changed:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// installMCSCRDs installs the MCS API's CRDs in every cluster of the bed.
func installMCSCRDs(ctx context.Context, bed *testbed.Bed) error {
	for _, c := range bed.Clusters() {
		if err := installCRDsFrom(ctx, c, "crd/mcs/*.yaml"); err != nil {
			return fmt.Errorf("the MCS API's CRDs in %s: %w", c.Name, err)
		}
	}
	return nil
}

// measureMCS exports one name from every cluster of the set (a Service without selector and its
// EndpointSlices, as any EndpointSlice writer would), then writes n ready endpoints split over the
// clusters and times until every cluster's import holds all of them; then flips one endpoint at a
// time and times until every other cluster sees it.
func measureMCS(ctx context.Context, bed *testbed.Bed, n int) (*MCSResult, error) {
	clusters := bed.Clusters()
	res := &MCSResult{Clusters: len(clusters), Endpoints: n, TargetAllImportedSeconds: 5, TargetChangeP50Millis: 1000}
	w := &importWatch{changed: make(chan struct{}, 1)}
	stop := make(chan struct{})
	defer close(stop)
	for i, c := range clusters {
		w.present = append(w.present, map[string]bool{})
		w.slices = append(w.slices, map[string][]string{})
		f := informers.NewSharedInformerFactoryWithOptions(c.Clientset, 0, informers.WithNamespace(mcsNamespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = mcsv1beta1.LabelServiceName + "=" + mcsName }))
		if _, err := f.Discovery().V1().EndpointSlices().Informer().AddEventHandler(w.handler(i)); err != nil {
			return nil, err
		}
		f.Start(stop)
	}
	if err := exportEverywhere(ctx, clusters); err != nil {
		return nil, err
	}
	all, err := writeEndpoints(ctx, clusters, n)
	if err != nil {
		return nil, err
	}
	written := time.Now()
	if err := w.waitFor(ctx, 2*time.Minute, func(p []map[string]bool) bool {
		return !slices.ContainsFunc(p, func(m map[string]bool) bool { return len(m) < n })
	}); err != nil {
		return nil, fmt.Errorf("%d endpoints in every import: %w", n, err)
	}
	res.AllImportedSeconds = round(time.Since(written).Seconds())
	lat, err := flipEndpoints(ctx, clusters, all, w)
	if err != nil {
		return nil, err
	}
	res.Changes, res.ChangeP50Millis, res.ChangeP90Millis = len(lat), percentile(lat, 0.5), percentile(lat, 0.9)
	return res, nil
}

// exportEverywhere makes the Service (no selector) and its ServiceExport in every cluster, and
// waits until every cluster's import lists them all: what is timed next is the endpoints, not
// the import's creation.
func exportEverywhere(ctx context.Context, clusters []*testbed.Cluster) error {
	for _, c := range clusters {
		// Flotilla may have made it already, for the import of an export in another cluster.
		if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mcsNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		if _, err := c.Clientset.CoreV1().Services(mcsNamespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: mcsName},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		cl, err := client.New(c.RESTConfig, client.Options{Scheme: benchScheme})
		if err != nil {
			return err
		}
		if err := cl.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: mcsNamespace, Name: mcsName}}); err != nil {
			return fmt.Errorf("exporting in %s: %w", c.Name, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, c := range clusters {
			cl, err := client.New(c.RESTConfig, client.Options{Scheme: benchScheme})
			if err != nil {
				return false, err
			}
			var imp mcsv1beta1.ServiceImport
			if cl.Get(ctx, client.ObjectKey{Namespace: mcsNamespace, Name: mcsName}, &imp) != nil || len(imp.Status.Clusters) != len(clusters) {
				return false, nil
			}
		}
		return true, nil
	})
}

// writtenSlice is an EndpointSlice the bench wrote in one cluster.
type writtenSlice struct {
	cluster int
	slice   *discoveryv1.EndpointSlice
}

// writeEndpoints writes n ready endpoints split over the clusters, in slices of perSlice, all in
// parallel.
func writeEndpoints(ctx context.Context, clusters []*testbed.Cluster, n int) ([]writtenSlice, error) {
	var all []writtenSlice
	for i := range clusters {
		share := n / len(clusters)
		if i < n%len(clusters) {
			share++
		}
		for start := 0; start < share; start += perSlice {
			s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: mcsNamespace, Name: fmt.Sprintf("%s-%d", mcsName, start/perSlice),
				Labels: map[string]string{discoveryv1.LabelServiceName: mcsName, discoveryv1.LabelManagedBy: "bench"}},
				AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}}}
			for j := start; j < min(start+perSlice, share); j++ {
				s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 200+i, j/250, 1+j%250)},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
			}
			all = append(all, writtenSlice{i, s})
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(all))
	for k, x := range all {
		wg.Go(func() {
			created, err := clusters[x.cluster].Clientset.DiscoveryV1().EndpointSlices(mcsNamespace).Create(ctx, x.slice, metav1.CreateOptions{})
			if err == nil {
				all[k].slice = created
			}
			errs[k] = err
		})
	}
	wg.Wait()
	return all, errors.Join(errs...)
}

// flipEndpoints makes one endpoint at a time not ready, then ready again, in turn in each
// cluster, and returns (sorted) how long each change took to show in every other cluster's import.
func flipEndpoints(ctx context.Context, clusters []*testbed.Cluster, all []writtenSlice, w *importWatch) ([]float64, error) {
	var lat []float64
	for k := range 40 {
		x := &all[((k/2)*7)%len(all)]
		addr := x.slice.Endpoints[0].Addresses[0]
		ready := k%2 == 1
		s := x.slice.DeepCopy()
		s.Endpoints[0].Conditions.Ready = ptr.To(ready)
		updated, err := clusters[x.cluster].Clientset.DiscoveryV1().EndpointSlices(mcsNamespace).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return nil, err
		}
		x.slice = updated
		t0 := time.Now()
		if err := w.waitFor(ctx, 30*time.Second, func(p []map[string]bool) bool {
			for i, m := range p {
				if i != x.cluster && m[addr] != ready {
					return false
				}
			}
			return true
		}); err != nil {
			return nil, fmt.Errorf("endpoint %s ready=%t in every other import: %w", addr, ready, err)
		}
		lat = append(lat, float64(time.Since(t0).Milliseconds()))
	}
	sort.Float64s(lat)
	return lat, nil
}
