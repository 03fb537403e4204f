package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is one single-binary image.
type Spec struct {
	Ref        string            // e.g. ghcr.io/flotilla-dev/flotilla-manager:0.1.0
	Entrypoint string            // path of the binary in the image, e.g. /flotilla-manager
	User       string            // numeric uid:gid, e.g. 65532:65532 (numeric so the kubelet can enforce runAsNonRoot)
	Binaries   map[string]string // platform ("linux/amd64") -> path of a static binary on the host
	Labels     map[string]string // OCI labels (optional)
	// Links are absolute paths made symbolic links to the entrypoint (optional): a multi-call
	// binary answers to each name, as busybox's applets do (/bin/sh, /bin/sleep).
	Links []string
	// Env is the image's environment (optional), e.g. PATH=/bin for the links.
	Env []string
}

// sourceDateEpochEnv is the reproducible-builds convention for a build's timestamp.
const sourceDateEpochEnv = "SOURCE_DATE_EPOCH"

// validated is a Spec checked once, with its parsed reference and platforms in a stable order.
type validated struct {
	spec      Spec
	tag       name.Tag
	platforms []v1.Platform // sorted, so that an index lists them in the same order every build
	binaries  map[string]string
	created   time.Time
}

func (s Spec) validate() (*validated, error) {
	tag, err := name.NewTag(s.Ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q (a tag such as ghcr.io/org/name:0.1.0): %w", s.Ref, err)
	}
	if !path.IsAbs(s.Entrypoint) || path.Clean(s.Entrypoint) != s.Entrypoint || s.Entrypoint == "/" {
		return nil, fmt.Errorf("entrypoint %q: want the clean absolute path of a file, such as /flotilla-manager", s.Entrypoint)
	}
	if err := checkUser(s.User); err != nil {
		return nil, err
	}
	if len(s.Binaries) == 0 {
		return nil, fmt.Errorf("image %s: no binaries (want at least one platform such as linux/amd64)", s.Ref)
	}
	for _, l := range s.Links {
		if !path.IsAbs(l) || path.Clean(l) != l || l == "/" || l == s.Entrypoint {
			return nil, fmt.Errorf("link %q: want the clean absolute path of a file other than the entrypoint, such as /bin/sh", l)
		}
	}
	created, err := buildTime()
	if err != nil {
		return nil, err
	}
	v := &validated{spec: s, tag: tag, binaries: make(map[string]string, len(s.Binaries)), created: created}
	for key, bin := range s.Binaries {
		p, err := parsePlatform(key)
		if err != nil {
			return nil, err
		}
		if _, dup := v.binaries[p.String()]; dup {
			return nil, fmt.Errorf("platform %s is given twice", p)
		}
		v.binaries[p.String()] = bin
		v.platforms = append(v.platforms, p)
	}
	sort.Slice(v.platforms, func(i, j int) bool { return v.platforms[i].String() < v.platforms[j].String() })
	return v, nil
}

// checkUser refuses a user name: the kubelet can only verify runAsNonRoot against a
// numeric uid, and an image without /etc/passwd could not resolve a name anyway.
func checkUser(user string) error {
	if user == "" {
		return fmt.Errorf("user is empty: want a numeric uid[:gid] such as 65532:65532 (empty would run as root)")
	}
	uid, gid, hasGID := strings.Cut(user, ":")
	ids := []string{uid}
	if hasGID {
		ids = append(ids, gid)
	}
	for _, id := range ids {
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return fmt.Errorf("user %q: want a numeric uid[:gid] such as 65532:65532, so that the kubelet can enforce runAsNonRoot", user)
		}
	}
	return nil
}

// parsePlatform reads os/arch[/variant]; Linux only, as the image has no Windows layer format.
func parsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return v1.Platform{}, fmt.Errorf("platform %q: want os/arch[/variant], such as linux/amd64", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	if p.OS != "linux" {
		return v1.Platform{}, fmt.Errorf("platform %q: only linux images are built", s)
	}
	return p, nil
}

// buildTime is the timestamp of every file, history entry and config: SOURCE_DATE_EPOCH
// when set, else the Unix epoch, so that two builds of one binary have one digest.
func buildTime() (time.Time, error) {
	env, ok := os.LookupEnv(sourceDateEpochEnv)
	if !ok || env == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	secs, err := strconv.ParseInt(env, 10, 64)
	if err != nil || secs < 0 {
		return time.Time{}, fmt.Errorf("%s=%q: want seconds since the Unix epoch", sourceDateEpochEnv, env)
	}
	return time.Unix(secs, 0).UTC(), nil
}

// image builds the image of one platform.
func (v *validated) image(p v1.Platform) (v1.Image, error) {
	bin := v.binaries[p.String()]
	if err := checkStaticBinary(bin, p.Architecture); err != nil {
		return nil, err
	}
	content, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("reading the %s binary: %w", p, err)
	}
	layer, err := binaryLayer(v.spec.Entrypoint, v.spec.Links, content, v.created)
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", bin, err)
	}
	cfg := &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      v1.Time{Time: v.created},
		Config: v1.Config{
			Entrypoint: []string{v.spec.Entrypoint},
			User:       v.spec.User,
			WorkingDir: "/",
			Labels:     v.spec.Labels,
			Env:        v.spec.Env,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", p, err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: v.created}, CreatedBy: "ociimage: " + v.spec.Entrypoint},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer of %s: %w", p, err)
	}
	return img, nil
}

// index builds the image of every platform and lists them in one index.
func (v *validated) index() (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range v.platforms {
		img, err := v.image(p)
		if err != nil {
			return nil, err
		}
		platform := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	return idx, nil
}

// binaryLayer is a gzipped tar of the binary at entrypoint, the symbolic links to it, and their
// parent directories, owned by 0:0 with no user or group names, every timestamp at mtime. It is
// compressed here, once, rather than by go-containerregistry at each read of the layer.
func binaryLayer(entrypoint string, links []string, content []byte, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	tw := tar.NewWriter(zw)
	rel := strings.TrimPrefix(entrypoint, "/")
	written := map[string]bool{}
	for _, p := range append([]string{rel}, relatives(links)...) {
		for _, dir := range parentDirs(p) {
			if written[dir] {
				continue
			}
			written[dir] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: mtime}); err != nil {
				return nil, fmt.Errorf("tar header of %s: %w", dir, err)
			}
		}
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o755, Size: int64(len(content)), ModTime: mtime}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("tar header of %s: %w", rel, err)
	}
	if _, err := tw.Write(content); err != nil {
		return nil, fmt.Errorf("tar of %s: %w", rel, err)
	}
	for _, l := range relatives(links) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: l, Linkname: entrypoint, Mode: 0o777, ModTime: mtime}); err != nil {
			return nil, fmt.Errorf("tar header of %s: %w", l, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	compressed := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// relatives are the links' paths without their leading slash, sorted, each once.
func relatives(links []string) []string {
	out := make([]string, 0, len(links))
	for _, l := range links {
		out = append(out, strings.TrimPrefix(l, "/"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// parentDirs lists the directories above rel, outermost first ("a/b/c" -> "a", "a/b").
func parentDirs(rel string) []string {
	var dirs []string
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		dirs = append([]string{dir}, dirs...)
	}
	return dirs
}
