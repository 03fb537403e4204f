// Package config carries Flotilla's generated manifests (CRDs under crd/bases, written by
// controller-gen from pkg/apis) into the binaries that install them: flotillactl installs the
// FlotillaPrimary CRD in a secondary at join time, and the test bed installs the primary's CRDs.
package config

import "embed"

// CRDs holds the generated CustomResourceDefinitions, one file per kind.
//
//go:embed crd/bases/*.yaml
var CRDs embed.FS
