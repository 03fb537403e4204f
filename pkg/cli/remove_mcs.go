package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/mcs"
)

// setMembership are the objects that make a secondary a member of this primary's ClusterSet:
// the Multi-Cluster Services imports (and the EndpointSlices and Services they carry, in any
// namespace) and the About API's ClusterProperties. Each kind is tried in the versions it is
// served in, newest first; ours picks Flotilla's among those carrying the primary's label.
var setMembership = []struct {
	versions []schema.GroupVersionResource
	ours     func(u *unstructured.Unstructured) bool
}{
	{mcs.ServiceImports.Versions(), func(*unstructured.Unstructured) bool { return true }},
	{[]schema.GroupVersionResource{{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}},
		func(u *unstructured.Unstructured) bool {
			return u.GetLabels()[discoveryv1.LabelManagedBy] == mcs.ManagedBy
		}},
	{[]schema.GroupVersionResource{{Version: "v1", Resource: "services"}},
		func(u *unstructured.Unstructured) bool {
			return strings.HasPrefix(u.GetName(), mcs.DerivedServicePrefix)
		}},
	{[]schema.GroupVersionResource{{Group: "about.k8s.io", Version: "v1beta1", Resource: "clusterproperties"},
		{Group: "about.k8s.io", Version: "v1alpha1", Resource: "clusterproperties"}}, func(*unstructured.Unstructured) bool { return true }},
}

// removeSetMembership deletes, with the user's own credentials, what this primary wrote in the
// secondary as a member of its ClusterSet: imports, their EndpointSlices and Services, and its
// ClusterProperties, each only when it carries this primary's label (a user's or another
// implementation's is never touched). A kind the cluster does not serve is skipped.
func removeSetMembership(ctx context.Context, dyn dynamic.Interface, cluster, primaryID string, out io.Writer) error {
	members, err := setMembers(ctx, dyn, cluster, primaryID)
	if err != nil {
		return err
	}
	for _, m := range members {
		uid := m.object.GetUID()
		err := dyn.Resource(m.resource).Namespace(m.object.GetNamespace()).Delete(ctx, m.object.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s in %s: %w", m.resource.Resource, objectName(m.object), cluster, err)
		}
	}
	if len(members) > 0 {
		fmt.Fprintf(out, "Deleted %d ServiceImport, EndpointSlice, Service and ClusterProperty object(s) of this primary's ClusterSet in %s.\n", len(members), cluster)
	}
	return nil
}

// setMember is one object that makes a secondary a member of this primary's ClusterSet, and the
// resource it was listed as.
type setMember struct {
	resource schema.GroupVersionResource
	object   *unstructured.Unstructured
}

// String names the member as remove says it: resource namespace/name.
func (m setMember) String() string { return m.resource.Resource + " " + objectName(m.object) }

// setMembers lists the objects of this primary's ClusterSet in the secondary (setMembership),
// each kind in the newest version the cluster serves.
func setMembers(ctx context.Context, dyn dynamic.Interface, cluster, primaryID string) ([]setMember, error) {
	selector := metav1.ListOptions{LabelSelector: flotillav1.LabelPrimary + "=" + primaryID}
	var members []setMember
	for _, kind := range setMembership {
		for _, gvr := range kind.versions {
			list, err := dyn.Resource(gvr).List(ctx, selector)
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue // not served in this version
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s in %s: %w", gvr.Resource, cluster, err)
			}
			for i := range list.Items {
				if u := &list.Items[i]; kind.ours(u) {
					members = append(members, setMember{resource: gvr, object: u})
				}
			}
			break // the newest version served lists them all
		}
	}
	return members, nil
}

func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}
