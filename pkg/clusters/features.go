package clusters

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Feature is an API Flotilla uses in a secondary that not every cluster serves: a Kubernetes minor
// may lack it, an admin may have turned it off, or its CRD may not be installed. Whether a cluster
// has it is read from its discovery, never from its version string.
type Feature struct {
	// Name is how the ClusterDetector names it.
	Name string
	// Resource is what the cluster must serve, in any of Versions ("pods/resize": a subresource).
	Group    string
	Versions []string
	Resource string
	// Without says what Flotilla does without it there.
	Without string
}

// Features are the APIs Flotilla reads each secondary's discovery for.
var Features = []Feature{
	{Name: "DynamicResourceAllocation", Group: "resource.k8s.io", Versions: []string{"v1"}, Resource: "deviceclasses",
		Without: "pods that claim devices are not placed there"},
	{Name: "InPlacePodResize", Versions: []string{"v1"}, Resource: "pods/resize",
		Without: "a proxy's in-place resize is not carried to its delegate there"},
	{Name: "ValidatingAdmissionPolicy", Group: "admissionregistration.k8s.io", Versions: []string{"v1"}, Resource: "validatingadmissionpolicies",
		Without: "`flotillactl cluster join` cannot fence Flotilla's identity there"},
	{Name: "MultiClusterServices", Group: "multicluster.x-k8s.io", Versions: []string{"v1alpha1"}, Resource: "serviceexports",
		Without: "its Services are neither exported nor imported (install the Multi-Cluster Services CRDs)"},
	{Name: "AboutAPI", Group: "about.k8s.io", Versions: []string{"v1alpha1"}, Resource: "clusterproperties",
		Without: "it has no ClusterSet identity (install the About API CRD)"},
	{Name: "ResourceMetrics", Group: "metrics.k8s.io", Versions: []string{"v1beta1"}, Resource: "pods",
		Without: "kubectl top and HPAs in the primary see no usage of its delegates (install metrics-server)"},
}

// gvr names a feature's resource as the ClusterDetector says it ("pods/resize (v1)").
func (f Feature) gvr() string {
	gv := strings.Join(f.Versions, "|")
	if f.Group != "" {
		gv = f.Group + "/" + gv
	}
	return fmt.Sprintf("%s (%s)", f.Resource, gv)
}

// MissingFeatures reads a cluster's discovery and says, for each Feature it lacks, its name, its
// resource and what Flotilla does without it, sorted. A group whose discovery failed (an
// aggregated API that does not answer) counts as missing, saying so; any other failure is an
// error.
func MissingFeatures(d discovery.ServerResourcesInterface) ([]string, error) {
	_, lists, err := d.ServerGroupsAndResources()
	failed := map[schema.GroupVersion]error{}
	var partial *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &partial) {
		failed = partial.Groups
	} else if err != nil {
		return nil, fmt.Errorf("reading the cluster's discovery: %w", err)
	}
	return missingIn(lists, failed), nil
}

// missingIn is MissingFeatures over discovery's lists and the group versions whose discovery
// failed.
func missingIn(lists []*metav1.APIResourceList, failed map[schema.GroupVersion]error) []string {
	served := map[string]bool{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			served[l.GroupVersion+" "+r.Name] = true
		}
	}
	var out []string
	for _, f := range Features {
		found, broken := false, false
		for _, v := range f.Versions {
			gv := schema.GroupVersion{Group: f.Group, Version: v}
			found = found || served[gv.String()+" "+f.Resource]
			_, b := failed[gv]
			broken = broken || b
		}
		switch {
		case found:
		case broken:
			out = append(out, fmt.Sprintf("%s: %s does not answer discovery, so %s", f.Name, f.gvr(), f.Without))
		default:
			out = append(out, fmt.Sprintf("%s: %s not served, so %s", f.Name, f.gvr(), f.Without))
		}
	}
	slices.Sort(out)
	return out
}
