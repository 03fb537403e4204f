package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Resync is how often the inventory is written again without a change of a cluster's state (a
// CRD installed since, an object deleted by hand).
const Resync = time.Minute

var (
	clusterPropertyKind = schema.GroupKind{Group: "about.k8s.io", Kind: "ClusterProperty"}
	clusterProfileKind  = schema.GroupKind{Group: "multicluster.x-k8s.io", Kind: "ClusterProfile"}
)

// Reconciler writes the set's ClusterProperties and ClusterProfiles; it has one key.
type Reconciler struct {
	// Client reads and writes the primary.
	Client client.Client
	// Live reads the primary uncached: the credential Secrets of consumer namespaces (the cache
	// holds Secrets of flotilla-system only).
	Live     client.Reader
	Registry *clusters.Registry
	// PrimaryName is the primary's name in the set (--primary-name).
	PrimaryName string
	// Namespace is where the ClusterProfiles are (the manager's system namespace).
	Namespace string
	// ConsumerNamespaces are where readers of the inventory run (MultiKueue's kueue-system):
	// each gets the ClusterProfiles too, and for each secondary reached directly the credential
	// Secret its access provider reads (--inventory-namespaces).
	ConsumerNamespaces []string
	Recorder           events.EventRecorder
	Clock              clock.PassiveClock

	// credentials is the hash of the token last written in each consumer namespace's Secret
	// (namespace/name): an unchanged token is not written again.
	credentials sync.Map
	// consumerTokens is, per secondary, the readers' token last minted there (mintedToken).
	consumerTokens sync.Map
}

// member is a cluster of the set this reconcile reaches.
type member struct {
	name   string
	client client.Client
}

// Reconcile writes every reachable cluster's ClusterProperties, then the secondaries'
// ClusterProfiles in the primary.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	set := r.Registry.PrimaryID()
	if set == "" {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	members := []member{{name: r.PrimaryName, client: r.Client}}
	for _, s := range r.Registry.Snapshots() {
		if s.Role != clusters.RoleSecondary {
			continue
		}
		if sec, ok := r.Registry.Secondary(s.Name); ok && sec.Running {
			members = append(members, member{name: s.Name, client: sec.Client})
		}
	}
	errs := make([]error, len(members)+1)
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { errs[i] = r.ensureProperties(ctx, m, set) })
	}
	wg.Wait()
	errs[len(members)] = r.publishProfiles(ctx, set, r.Namespace)
	for _, ns := range r.ConsumerNamespaces {
		errs = append(errs, r.publishProfiles(ctx, set, ns), r.publishCredentials(ctx, ns))
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: Resync}, nil
}

// served is the version of a kind the cluster serves, if it does.
func served(c client.Client, gk schema.GroupKind) (schema.GroupVersionKind, bool, error) {
	m, err := c.RESTMapper().RESTMapping(gk)
	switch {
	case meta.IsNoMatchError(err):
		return schema.GroupVersionKind{}, false, nil
	case err != nil:
		return schema.GroupVersionKind{}, false, fmt.Errorf("looking up %s: %w", gk, err)
	}
	return m.GroupVersionKind, true, nil
}

// ensureProperties writes a cluster's identity where it serves the About API.
func (r *Reconciler) ensureProperties(ctx context.Context, m member, set string) error {
	gvk, ok, err := served(m.client, clusterPropertyKind)
	if err != nil || !ok {
		return err
	}
	id := r.Registry.PrimaryID()
	for name, value := range Properties(m.name, set) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		err := m.client.Get(ctx, client.ObjectKey{Name: name}, u)
		switch {
		case apierrors.IsNotFound(err):
			u.SetName(name)
			u.SetLabels(map[string]string{flotillav1.LabelPrimary: id})
			if err := unstructured.SetNestedField(u.Object, value, "spec", "value"); err != nil {
				return err
			}
			if err := m.client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating ClusterProperty %s in %s: %w", name, m.name, err)
			}
			continue
		case err != nil:
			return fmt.Errorf("reading ClusterProperty %s in %s: %w", name, m.name, err)
		}
		have, _, _ := unstructured.NestedString(u.Object, "spec", "value")
		switch {
		case have == value:
		case u.GetLabels()[flotillav1.LabelPrimary] == id:
			if err := unstructured.SetNestedField(u.Object, value, "spec", "value"); err != nil {
				return err
			}
			if err := m.client.Update(ctx, u); err != nil {
				return fmt.Errorf("updating ClusterProperty %s in %s: %w", name, m.name, err)
			}
		default:
			r.warn(m.name, "ClusterPropertyTaken", fmt.Sprintf("ClusterProperty %s of cluster %s is %q, not Flotilla's %q, and not this primary's: it is left as it is (the cluster is another ClusterSet's member?)", name, m.name, have, value))
		}
	}
	return nil
}

func (r *Reconciler) warn(cluster, reason, msg string) {
	if r.Recorder == nil {
		return
	}
	cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: cluster}}
	r.Recorder.Eventf(cd, nil, corev1.EventTypeWarning, reason, "Inventory", "%s", msg)
}

// publishProfiles makes every registered secondary's ClusterProfile in the primary true, and
// deletes those of clusters no longer registered.
func (r *Reconciler) publishProfiles(ctx context.Context, set, namespace string) error {
	gvk, ok, err := served(r.Client, clusterProfileKind)
	if err != nil || !ok {
		return err
	}
	id := r.Registry.PrimaryID()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.Client.List(ctx, list, client.InNamespace(namespace),
		client.MatchingLabels{LabelClusterManager: ClusterManager, flotillav1.LabelPrimary: id}); err != nil {
		return fmt.Errorf("listing ClusterProfiles in %s: %w", namespace, err)
	}
	existing := map[string]*unstructured.Unstructured{}
	var written []string
	for i := range list.Items {
		existing[list.Items[i].GetName()] = &list.Items[i]
		written = append(written, list.Items[i].GetName())
	}
	var registered []string
	var errs []error
	now := r.Clock.Now()
	for _, s := range r.Registry.Snapshots() {
		if s.Role != clusters.RoleSecondary || r.Registry.Removed(s.Name) {
			continue
		}
		registered = append(registered, s.Name)
		errs = append(errs, r.publish(ctx, gvk, namespace, existing[ProfileName(s.Name)], s, set, now))
	}
	for _, name := range Stale(written, registered) {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, existing[name])); err != nil {
			errs = append(errs, fmt.Errorf("deleting ClusterProfile %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// publish creates or updates one secondary's ClusterProfile and its status.
func (r *Reconciler) publish(ctx context.Context, gvk schema.GroupVersionKind, namespace string, u *unstructured.Unstructured, s clusters.Snapshot, set string, now time.Time) error {
	name := ProfileName(s.Name)
	if u == nil {
		u = &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(namespace)
		u.SetName(name)
		u.SetLabels(map[string]string{LabelClusterManager: ClusterManager, flotillav1.LabelPrimary: r.Registry.PrimaryID()})
		u.Object["spec"] = map[string]any{"displayName": s.Name, "clusterManager": map[string]any{"name": ClusterManager}}
		if err := r.Client.Create(ctx, u); err != nil {
			return fmt.Errorf("creating ClusterProfile %s/%s: %w", namespace, name, err)
		}
	}
	want := StatusOf(s, set, now)
	var current struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	if st, ok := u.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(st, &current)
	}
	conds := current.Conditions
	for _, c := range want.Conditions {
		meta.SetStatusCondition(&conds, c)
	}
	var props []any
	for _, k := range []string{PropertyClusterID, PropertyClusterSet} {
		props = append(props, map[string]any{"name": k, "value": want.Properties[k], "lastObservedTime": now.UTC().Format(time.RFC3339)})
	}
	condsU := make([]any, 0, len(conds))
	for _, c := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		if err != nil {
			return err
		}
		condsU = append(condsU, m)
	}
	status := map[string]any{"conditions": condsU, "properties": props}
	if want.Version != "" {
		status["version"] = map[string]any{"kubernetes": want.Version}
	}
	if a, ok := r.Registry.AccessOf(s.Name); ok {
		status["accessProviders"] = AccessProviders(name, a.Server, a.CAData)
	}
	if equalIgnoringTimes(u.Object["status"], status) {
		return nil
	}
	u.Object["status"] = status
	if err := r.Client.Status().Update(ctx, u); err != nil {
		return fmt.Errorf("writing the status of ClusterProfile %s/%s: %w", namespace, name, err)
	}
	return nil
}

// equalIgnoringTimes compares two statuses but for the properties' lastObservedTime, which
// moves at every pass: a status is written only when something else changed.
func equalIgnoringTimes(a any, b map[string]any) bool {
	am, ok := a.(map[string]any)
	if !ok {
		return false
	}
	strip := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		if ps, ok := m["properties"].([]any); ok {
			var clean []any
			for _, p := range ps {
				if pm, ok := p.(map[string]any); ok {
					clean = append(clean, map[string]any{"name": pm["name"], "value": pm["value"]})
				}
			}
			out["properties"] = clean
		}
		return out
	}
	// JSON sorts map keys, and makes numbers of either origin alike.
	ja, errA := json.Marshal(strip(am))
	jb, errB := json.Marshal(strip(b))
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
