package mcs

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Group is the Multi-Cluster Services API's group.
const Group = mcsv1beta1.GroupName

// Kind is one kind of the Multi-Cluster Services API that Flotilla reads or writes in every
// cluster of the set.
type Kind struct {
	// Kind and Resource name it in the API's group (mcsv1beta1.GroupName), at the version
	// Flotilla reads and writes (mcsv1beta1.SchemeGroupVersion).
	Kind, Resource string
	// OlderVersions are other versions it may be served at, newest first: flotillactl removes
	// what Flotilla wrote at any of them.
	OlderVersions []string
}

// The Multi-Cluster Services API's kinds, the one table behind the controller's watches, the
// primary's check that the API is served, a primary's rights in a secondary (pkg/access) and
// flotillactl's removal of a secondary's set membership.
var (
	// ServiceExports are a user's: read in every namespace, their conditions written.
	ServiceExports = Kind{Kind: "ServiceExport", Resource: "serviceexports"}
	// ServiceImports are Flotilla's: one per exported name in every cluster of the set.
	ServiceImports = Kind{Kind: "ServiceImport", Resource: "serviceimports", OlderVersions: []string{"v1alpha1"}}
)

// Kinds lists the table.
var Kinds = []Kind{ServiceExports, ServiceImports}

// GroupKind is the kind's group and kind.
func (k Kind) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: mcsv1beta1.GroupName, Kind: k.Kind}
}

// Versions are the resource at the version Flotilla uses, then at each older one.
func (k Kind) Versions() []schema.GroupVersionResource {
	out := []schema.GroupVersionResource{mcsv1beta1.SchemeGroupVersion.WithResource(k.Resource)}
	for _, v := range k.OlderVersions {
		out = append(out, schema.GroupVersionResource{Group: mcsv1beta1.GroupName, Version: v, Resource: k.Resource})
	}
	return out
}
