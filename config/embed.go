// Package config carries Flotilla's generated manifests (CRDs under crd/bases, written by
// controller-gen from pkg/apis; the Multi-Cluster Services API's under crd/mcs, as its module
// ships them) into the binaries that install them: flotillactl installs the FlotillaPrimary CRD
// in a secondary at join time, and the test bed and the bench install the others.
package config

import "embed"

// CRDs holds the CustomResourceDefinitions, one file per kind.
//
//go:embed crd/bases/*.yaml crd/mcs/*.yaml
var CRDs embed.FS
