// Package ociimage owns how Flotilla's single-binary container images are built: without Docker,
// so that `make image` and the test bed need nothing but Go.
//
// An image has no base: one layer holds one static binary, owned by root and run as a
// numeric non-root user, so that the kubelet can enforce runAsNonRoot and nothing but the
// binary (no shell, no CA bundle) is there to attack. Images are reproducible: the same
// binary and Spec give the same digest, timestamps coming from SOURCE_DATE_EPOCH (else the
// Unix epoch). The images are written as a docker-save tarball (for `ctr images import`),
// an OCI image layout, or pushed to a registry, all with go-containerregistry.
package ociimage
