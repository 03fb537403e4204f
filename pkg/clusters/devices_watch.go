package clusters

import (
	"context"
	"fmt"
	"sort"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// Why a secondary's devices are not known (placement.DeviceView.Unknown).
const (
	devicesNotServed    = "the cluster does not serve resource.k8s.io/v1 (Kubernetes 1.34 or later does)"
	devicesNotReadable  = "Flotilla's identity there may not read DeviceClasses, ResourceSlices and ResourceClaims: join the cluster again with this version of flotillactl"
	devicesNotKnownYet  = "its DeviceClasses, ResourceSlices and ResourceClaims are not listed yet"
	deviceProbeErrorFmt = "its DeviceClasses could not be listed: %v"
)

// deviceWatch keeps what placement judges device claims by in a secondary: its DeviceClasses, its
// ResourceSlices, and of its ResourceClaims only the devices they hold (a claim's spec, its
// consumers and anything else of it are dropped on arrival). It is started only once a list of
// DeviceClasses succeeds: a cluster that does not serve the API, or where Flotilla may not read
// it, says so once (placement.DeviceView.Unknown) rather than failing a watch for ever.
type deviceWatch struct {
	classes, slices, claims cache.SharedIndexInformer

	// unknown says why the devices are not watched ("" when they are); set once, at start.
	unknown string
}

// startDeviceWatch probes the secondary's DeviceClasses (bounded by probe) and, when they can be
// listed, starts the informers until ctx is done. changed is called on any change.
func startDeviceWatch(probe, ctx context.Context, cs kubernetes.Interface, changed func(), onError cache.WatchErrorHandlerWithContext) *deviceWatch {
	w := &deviceWatch{}
	if _, err := cs.ResourceV1().DeviceClasses().List(probe, metav1.ListOptions{Limit: 1}); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			w.unknown = devicesNotServed
		case apierrors.IsForbidden(err):
			w.unknown = devicesNotReadable
		default:
			w.unknown = fmt.Sprintf(deviceProbeErrorFmt, err)
		}
		return w
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(slimClaim))
	w.classes = factory.Resource().V1().DeviceClasses().Informer()
	w.slices = factory.Resource().V1().ResourceSlices().Informer()
	w.claims = factory.Resource().V1().ResourceClaims().Informer()
	handler := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { changed() }, UpdateFunc: func(any, any) { changed() }, DeleteFunc: func(any) { changed() }}
	for _, inf := range []cache.SharedIndexInformer{w.classes, w.slices, w.claims} {
		_ = inf.SetWatchErrorHandlerWithContext(onError)
		_, _ = inf.AddEventHandler(handler)
	}
	factory.Start(ctx.Done())
	go func() {
		// Empty lists bring no event: the view is recomputed once all three are listed.
		if cache.WaitForCacheSync(ctx.Done(), w.classes.HasSynced, w.slices.HasSynced, w.claims.HasSynced) {
			changed()
		}
		<-ctx.Done()
		factory.Shutdown()
	}()
	return w
}

// slimClaim keeps of a ResourceClaim what the allocated devices are read from.
func slimClaim(obj any) (any, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return obj, nil
	}
	out := &resourcev1.ResourceClaim{}
	out.Name, out.Namespace, out.UID, out.ResourceVersion = c.Name, c.Namespace, c.UID, c.ResourceVersion
	if a := c.Status.Allocation; a != nil {
		out.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: a.Devices.Results}}
	}
	return out, nil
}

// view is the devices as placement sees them now (Unknown while not listed yet).
func (w *deviceWatch) view() *placement.DeviceView {
	if w == nil {
		return nil
	}
	if w.unknown != "" {
		return &placement.DeviceView{Unknown: w.unknown}
	}
	if !w.classes.HasSynced() || !w.slices.HasSynced() || !w.claims.HasSynced() {
		return &placement.DeviceView{Unknown: devicesNotKnownYet}
	}
	v := &placement.DeviceView{Allocated: sets.New[structured.DeviceID]()}
	for _, o := range w.classes.GetStore().List() {
		if c, ok := o.(*resourcev1.DeviceClass); ok {
			v.Classes = append(v.Classes, c)
		}
	}
	for _, o := range w.slices.GetStore().List() {
		if s, ok := o.(*resourcev1.ResourceSlice); ok {
			v.Slices = append(v.Slices, s)
		}
	}
	for _, o := range w.claims.GetStore().List() {
		c, ok := o.(*resourcev1.ResourceClaim)
		if !ok || c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			v.Allocated.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	// Listed in a stable order: the allocator's choices, and the counts, do not depend on a map's.
	sort.Slice(v.Classes, func(i, j int) bool { return v.Classes[i].Name < v.Classes[j].Name })
	sort.Slice(v.Slices, func(i, j int) bool { return v.Slices[i].Name < v.Slices[j].Name })
	return v
}
