package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of Flotilla's objects.
	GroupVersion = schema.GroupVersion{Group: "flotilla.dev", Version: "v1alpha1"}

	// SchemeBuilder registers Flotilla's types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds Flotilla's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
