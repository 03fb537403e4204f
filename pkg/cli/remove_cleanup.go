package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// policySettle is how long the API server is given to drop a deleted admission policy binding
// from its admission (its informer sees the deletion within milliseconds).
const policySettle = 3 * time.Second

// removeAccess deletes, with the user's own credentials for the secondary, what `join` made there
// for this primary: its bindings first (the identity loses its rights at once), then its
// ServiceAccount, roles, the admission policy's parameters, binding and policy. Each only when it
// still carries this primary's flotilla.dev/primary label: an object of that name that is not ours
// is left and named. The namespace flotilla-system stays (the chart's, or other primaries').
func removeAccess(ctx context.Context, c client.Client, cluster, primaryID string, out io.Writer) error {
	ours, left, err := accessToRemove(ctx, c, cluster, primaryID)
	if err != nil {
		return err
	}
	for _, what := range left {
		fmt.Fprintf(out, "Left %s in %s: it does not carry %s=%s.\n", what, cluster, flotillav1.LabelPrimary, primaryID)
	}
	var removed []string
	for _, obj := range ours {
		if _, legacy := obj.(*corev1.ConfigMap); legacy && len(removed) > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(policySettle):
			}
		}
		what := accessName(obj)
		uid := obj.GetUID()
		if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s in %s: %w", what, cluster, err)
		}
		removed = append(removed, what)
	}
	if len(removed) > 0 {
		fmt.Fprintf(out, "Removed this primary's access to %s: %s.\n", cluster, strings.Join(removed, ", "))
	}
	return nil
}

// accessName names one of join's objects as remove says it: its type and key.
func accessName(obj client.Object) string {
	return strings.TrimPrefix(fmt.Sprintf("%T %s", obj, client.ObjectKeyFromObject(obj)), "*")
}

// accessToRemove reads what join made in the secondary for this primary, in the order remove
// deletes it: ours are those that carry this primary's label (as read, with their UIDs), left
// names those of the same names that do not.
func accessToRemove(ctx context.Context, c client.Client, cluster, primaryID string) (ours []client.Object, left []string, err error) {
	n := access.NamesFor(primaryID)
	ns := flotillav1.SystemNamespace
	objs := []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n.ClusterRole}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n.TokenRole, Namespace: ns}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n.AgentRole, Namespace: ns}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n.Consumer}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: n.ServiceAccount, Namespace: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: n.Consumer, Namespace: ns}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: n.MultiKueueRole}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: n.ClusterRole}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: n.TokenRole, Namespace: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: n.AgentRole, Namespace: ns}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: n.Policy}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: n.Policy}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: n.DelegatePolicy}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: n.DelegatePolicy}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: n.AllowancePolicy}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: n.AllowancePolicy}},
		// What it lends the primary: the lender then removes the quotas it wrote.
		&flotillav1.PrimaryAllowance{ObjectMeta: metav1.ObjectMeta{Name: primaryID}},
		// The policy's parameters, as joins before v0.2 made them: last, and only once the API
		// server's admission has had time to drop the binding (a binding it still holds whose
		// parameters are gone denies every request, every user's).
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n.Params, Namespace: ns}},
	}
	for _, obj := range objs {
		what := accessName(obj)
		switch err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("reading %s in %s: %w", what, cluster, err)
		}
		if obj.GetLabels()[flotillav1.LabelPrimary] != primaryID {
			left = append(left, what)
			continue
		}
		ours = append(ours, obj)
	}
	return ours, left, nil
}

// foreign lists the objects of a namespace that are not Flotilla's: neither labelled with this
// primary's ID nor what every namespace holds (its default ServiceAccount, the root CA ConfigMap),
// nor owned by another object (whose owner is judged instead). Events are history, not content.
func foreign(objs []unstructured.Unstructured, primaryID string) []string {
	var out []string
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		switch {
		case o.GetLabels()[flotillav1.LabelPrimary] == primaryID,
			len(o.GetOwnerReferences()) > 0,
			gk.Kind == "Event",
			gk == schema.GroupKind{Kind: "ServiceAccount"} && o.GetName() == "default",
			gk == schema.GroupKind{Kind: "ConfigMap"} && o.GetName() == "kube-root-ca.crt":
			continue
		}
		out = append(out, fmt.Sprintf("%s %s", strings.ToLower(gk.String()), o.GetName()))
	}
	sort.Strings(out)
	return out
}

// removeNamespaces deletes the namespaces this primary created in the secondary that hold nothing
// not Flotilla's (every namespaced kind the API server lists is read); a namespace that also
// holds something else is left, and what is named.
func removeNamespaces(ctx context.Context, sc secondaryClients, cluster, primaryID string, out io.Writer) error {
	empty, left, err := namespacesToRemove(ctx, sc, cluster, primaryID)
	if err != nil {
		return err
	}
	for _, l := range left {
		fmt.Fprintf(out, "Left namespace %s in %s: it also holds %s.\n", l.name, cluster, strings.Join(l.holds, ", "))
	}
	for i := range empty {
		ns := &empty[i]
		uid := ns.UID
		if err := sc.client.Delete(ctx, ns, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s in %s: %w", ns.Name, cluster, err)
		}
		fmt.Fprintf(out, "Deleted namespace %s in %s (created by Flotilla, nothing else in it).\n", ns.Name, cluster)
	}
	return nil
}

// leftNamespace is a namespace this primary created that remove leaves, and what else it holds.
type leftNamespace struct {
	name  string
	holds []string
}

// namespacesToRemove reads the namespaces this primary created in the secondary: empty are those
// that hold nothing not Flotilla's (every namespaced kind the API server lists is read), which
// remove deletes; left are those that also hold something else.
func namespacesToRemove(ctx context.Context, sc secondaryClients, cluster, primaryID string) (empty []corev1.Namespace, left []leftNamespace, err error) {
	var list corev1.NamespaceList
	if err := sc.client.List(ctx, &list, client.MatchingLabels{flotillav1.LabelManagedBy: primaryID}); err != nil {
		return nil, nil, fmt.Errorf("listing namespaces in %s: %w", cluster, err)
	}
	var candidates []corev1.Namespace
	for _, ns := range list.Items {
		if clusters.CreatedByFlotilla(&ns, primaryID) && ns.DeletionTimestamp.IsZero() {
			candidates = append(candidates, ns)
		}
	}
	if len(candidates) == 0 {
		return nil, nil, nil
	}
	resources, err := namespacedListable(sc.discovery)
	if err != nil {
		return nil, nil, fmt.Errorf("discovery of %s: %w", cluster, err)
	}
	for _, ns := range candidates {
		var objs []unstructured.Unstructured
		for _, gvr := range resources {
			l, err := sc.dynamic.Resource(gvr).Namespace(ns.Name).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, nil, fmt.Errorf("listing %s in namespace %s of %s: %w", gvr.Resource, ns.Name, cluster, err)
			}
			objs = append(objs, l.Items...)
		}
		if others := foreign(objs, primaryID); len(others) > 0 {
			left = append(left, leftNamespace{name: ns.Name, holds: others})
			continue
		}
		empty = append(empty, ns)
	}
	return empty, left, nil
}

// namespacedListable is every namespaced resource (preferred versions) the API server lists and
// that holds objects someone made: one that can be neither created nor deleted (an aggregated
// API's view, such as metrics.k8s.io's podmetrics, which lists every pod's usage) is left out, or a
// namespace would never be empty while a pod in it is measured.
func namespacedListable(dc discovery.DiscoveryInterface) ([]schema.GroupVersionResource, error) {
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, err
	}
	return userResources(lists), nil
}

// userResources are the resources of lists that are listed and hold what someone made.
func userResources(lists []*metav1.APIResourceList) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") ||
				(!slices.Contains(r.Verbs, "create") && !slices.Contains(r.Verbs, "delete")) {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	return out
}

// secondaryClients are the clients remove cleans up a secondary with, all with the user's own
// credentials: typed objects, discovery (which kinds a namespace may hold) and unstructured
// objects of those kinds.
type secondaryClients struct {
	client    client.Client
	discovery discovery.DiscoveryInterface
	dynamic   dynamic.Interface
}

// secondaryClientsAsUser are the clients of secondaryAsUser's.
func (g *GlobalOptions) secondaryClientsAsUser(ctx context.Context, contextName, wantID string) (secondaryClients, error) {
	c, rc, err := g.secondaryAsUser(ctx, contextName, wantID)
	if err != nil {
		return secondaryClients{}, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return secondaryClients{}, fmt.Errorf("discovery client of context %s: %w", contextName, err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return secondaryClients{}, fmt.Errorf("dynamic client of context %s: %w", contextName, err)
	}
	return secondaryClients{client: c, discovery: dc, dynamic: dyn}, nil
}

// secondaryAsUser is the user's own client for a registered secondary: the context of the user's
// kubeconfig of that name (or --secondary-context), checked to reach the very cluster registered (its
// kube-system UID, as the ClusterDetector recorded it).
func (g *GlobalOptions) secondaryAsUser(ctx context.Context, contextName, wantID string) (client.Client, *rest.Config, error) {
	user, err := g.userConfig()
	if err != nil {
		return nil, nil, err
	}
	if _, ok := user.Contexts[contextName]; !ok {
		return nil, nil, fmt.Errorf("context %q is not in your kubeconfig", contextName)
	}
	c, rc, err := clientFor(user, contextName)
	if err != nil {
		return nil, nil, err
	}
	id, err := clusters.ClusterID(ctx, c)
	if err != nil {
		return nil, nil, fmt.Errorf("context %s: %w", contextName, err)
	}
	if wantID != "" && id != wantID {
		return nil, nil, fmt.Errorf("context %s reaches cluster %s, not the registered %s", contextName, id, wantID)
	}
	return c, rc, nil
}
