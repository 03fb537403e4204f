package ociimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Annotations naming the image in a layout's index.json: the OCI one holds the tag, the
// containerd one the whole reference (what `ctr images import` names the image).
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// WriteTarball writes the image of one platform as a docker-save tarball tagged spec.Ref,
// which `ctr -n k8s.io images import`, `docker load` and `kind load image-archive` read.
// platform may be empty when spec has a single binary. The file appears only once
// complete, so an interrupted build leaves no truncated tarball behind.
func WriteTarball(spec Spec, platform, out string) error {
	v, err := spec.validate()
	if err != nil {
		return err
	}
	p, err := v.pick(platform)
	if err != nil {
		return err
	}
	img, err := v.image(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("directory of %s: %w", out, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".*.tmp")
	if err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tarball.Write(v.tag, img, tmp); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the %s image of %s: %w", p, v.tag, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	// CreateTemp makes the file 0600; a tarball is no secret.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("renaming to %s: %w", out, err)
	}
	return nil
}

// pick finds the platform WriteTarball was asked for.
func (v *validated) pick(platform string) (v1.Platform, error) {
	if platform == "" {
		if len(v.platforms) != 1 {
			return v1.Platform{}, fmt.Errorf("image %s has %d platforms: say which one to write", v.tag, len(v.platforms))
		}
		return v.platforms[0], nil
	}
	p, err := parsePlatform(platform)
	if err != nil {
		return v1.Platform{}, err
	}
	if _, ok := v.binaries[p.String()]; !ok {
		return v1.Platform{}, fmt.Errorf("platform %s: no binary given for it", p)
	}
	return p, nil
}

// WriteLayout writes an OCI image layout into dir: its index.json names spec.Ref and
// points to an image index of every platform (what `skopeo copy --all oci:dir:tag` or
// `crane push dir` reads). A layout already in dir loses its index.json, not its blobs.
func WriteLayout(spec Spec, dir string) error {
	v, err := spec.validate()
	if err != nil {
		return err
	}
	idx, err := v.index()
	if err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout in %s: %w", dir, err)
	}
	err = lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		annotationRefName:        v.tag.TagStr(),
		annotationContainerdName: v.tag.Name(),
	}))
	if err != nil {
		return fmt.Errorf("writing the index of %s into %s: %w", v.tag, dir, err)
	}
	return nil
}

// Push pushes an index of every platform to spec.Ref, with the credentials docker login,
// podman login or crane auth left in the user's config (authn.DefaultKeychain).
func Push(ctx context.Context, spec Spec) error {
	v, err := spec.validate()
	if err != nil {
		return err
	}
	idx, err := v.index()
	if err != nil {
		return err
	}
	err = remote.WriteIndex(v.tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return fmt.Errorf("pushing %s: %w", v.tag, err)
	}
	return nil
}
