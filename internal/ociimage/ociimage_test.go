package ociimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const testRef = "ghcr.io/flotilla-dev/flotilla-test:0.0.1"

// goBinary compiles a small static Go program for linux/amd64, the real kind of input.
func goBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("compiles a Go program")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "hello")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// fakeELF writes the smallest file debug/elf reads as an executable for machine; with
// interp it also asks for that dynamic loader, as a cgo binary does.
func fakeELF(t *testing.T, machine elf.Machine, interp string) string {
	t.Helper()
	hdr := elf.Header64{
		Ident:     [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(machine),
		Version:   uint32(elf.EV_CURRENT),
		Ehsize:    64,
		Phentsize: 56,
	}
	var body []any
	if interp != "" {
		hdr.Phoff, hdr.Phnum = 64, 1
		size := uint64(len(interp) + 1)
		body = append(body, elf.Prog64{Type: uint32(elf.PT_INTERP), Off: 64 + 56, Filesz: size, Memsz: size}, []byte(interp+"\x00"))
	}
	var buf bytes.Buffer
	for _, part := range append([]any{hdr}, body...) {
		if err := binary.Write(&buf, binary.LittleEndian, part); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(path, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func testSpec(binaries map[string]string) Spec {
	return Spec{
		Ref:        testRef,
		Entrypoint: "/flotilla-test",
		User:       "65532:65532",
		Binaries:   binaries,
		Labels:     map[string]string{"org.opencontainers.image.source": "https://github.com/flotilla-dev/flotilla"},
	}
}

// layerFiles lists the entries of a layer's tar with their contents.
func layerFiles(t *testing.T, layer v1.Layer) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	var hdrs []*tar.Header
	contents := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, contents
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, hdr)
		contents[hdr.Name] = b
	}
}

func readTarball(t *testing.T, path string) v1.Image {
	t.Helper()
	tag, err := name.NewTag(testRef)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("reading %s back as %s: %v", path, testRef, err)
	}
	return img
}

func TestWriteTarball(t *testing.T) {
	bin := goBinary(t)
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteTarball(testSpec(map[string]string{"linux/amd64": bin}), "linux/amd64", out); err != nil {
		t.Fatal(err)
	}
	img := readTarball(t, out)

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("layers: got %d, want 1", len(layers))
	}
	hdrs, contents := layerFiles(t, layers[0])
	if len(hdrs) != 1 {
		t.Fatalf("layer entries: got %d, want only the binary", len(hdrs))
	}
	h := hdrs[0]
	if h.Name != "flotilla-test" || h.Typeflag != tar.TypeReg {
		t.Errorf("entry: got %q type %c, want the regular file flotilla-test", h.Name, h.Typeflag)
	}
	if h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
		t.Errorf("entry: mode %o owner %d:%d (%q:%q), want 755 0:0 with no names", h.Mode, h.Uid, h.Gid, h.Uname, h.Gname)
	}
	if !h.ModTime.Equal(time.Unix(0, 0)) {
		t.Errorf("entry mtime: got %v, want the epoch", h.ModTime)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(contents["flotilla-test"], want) {
		t.Error("the binary in the layer differs from the one built")
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/flotilla-test" || c.WorkingDir != "/" || len(c.Cmd) != 0 {
		t.Errorf("config: user %q entrypoint %q cmd %q workdir %q", c.User, c.Entrypoint, c.Cmd, c.WorkingDir)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("config platform: got %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if c.Labels["org.opencontainers.image.source"] == "" {
		t.Errorf("config labels: got %v", c.Labels)
	}
}

func TestReproducible(t *testing.T) {
	spec := testSpec(map[string]string{"linux/amd64": fakeELF(t, elf.EM_X86_64, "")})
	dir := t.TempDir()
	build := func(out string) (v1.Hash, []byte) {
		t.Helper()
		if err := WriteTarball(spec, "", filepath.Join(dir, out)); err != nil {
			t.Fatal(err)
		}
		digest, err := readTarball(t, filepath.Join(dir, out)).Digest()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, out))
		if err != nil {
			t.Fatal(err)
		}
		return digest, b
	}
	d1, b1 := build("1.tar")
	d2, b2 := build("2.tar")
	if d1 != d2 || !bytes.Equal(b1, b2) {
		t.Fatalf("two builds of one binary differ: %s and %s", d1, d2)
	}

	t.Setenv(sourceDateEpochEnv, "1700000000")
	d3, _ := build("3.tar")
	if d3 == d1 {
		t.Error("SOURCE_DATE_EPOCH did not change the image")
	}
	cfg, err := readTarball(t, filepath.Join(dir, "3.tar")).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Created.Unix(); got != 1700000000 {
		t.Errorf("created: got %d, want SOURCE_DATE_EPOCH", got)
	}
}

func TestNestedEntrypoint(t *testing.T) {
	spec := testSpec(map[string]string{"linux/amd64": fakeELF(t, elf.EM_X86_64, "")})
	spec.Entrypoint = "/usr/local/bin/pause"
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteTarball(spec, "", out); err != nil {
		t.Fatal(err)
	}
	layers, err := readTarball(t, out).Layers()
	if err != nil {
		t.Fatal(err)
	}
	hdrs, _ := layerFiles(t, layers[0])
	var got []string
	for _, h := range hdrs {
		got = append(got, h.Name)
		if h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mode %o owner %d:%d", h.Name, h.Mode, h.Uid, h.Gid)
		}
	}
	if want := "usr/ usr/local/ usr/local/bin/ usr/local/bin/pause"; strings.Join(got, " ") != want {
		t.Errorf("entries: got %q, want %q", got, want)
	}
}

// A multi-call binary answers to its links' names (busybox's applets): they are symbolic links to
// the entrypoint, their directories made once, and the environment reaches the config.
func TestLinksAndEnv(t *testing.T) {
	spec := testSpec(map[string]string{"linux/amd64": fakeELF(t, elf.EM_X86_64, "")})
	spec.Links = []string{"/bin/sleep", "/bin/sh", "/bin/sh"}
	spec.Env = []string{"PATH=/bin"}
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteTarball(spec, "", out); err != nil {
		t.Fatal(err)
	}
	img := readTarball(t, out)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	hdrs, _ := layerFiles(t, layers[0])
	var got []string
	for _, h := range hdrs {
		entry := h.Name
		if h.Typeflag == tar.TypeSymlink {
			entry += "->" + h.Linkname
		}
		got = append(got, entry)
	}
	if want := "bin/ flotilla-test bin/sh->/flotilla-test bin/sleep->/flotilla-test"; strings.Join(got, " ") != want {
		t.Errorf("entries: got %q, want %q", got, want)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Config.Env, " ") != "PATH=/bin" {
		t.Errorf("env: got %q", cfg.Config.Env)
	}
	spec.Links = []string{"bin/sh"}
	if err := WriteTarball(spec, "", out); err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Errorf("a relative link: got %v", err)
	}
}

func TestRefused(t *testing.T) {
	amd64 := fakeELF(t, elf.EM_X86_64, "")
	cases := map[string]struct {
		mutate   func(*Spec)
		platform string
		want     string
	}{
		"user name":           {mutate: func(s *Spec) { s.User = "nonroot" }, want: "numeric uid"},
		"group name":          {mutate: func(s *Spec) { s.User = "65532:nogroup" }, want: "numeric uid"},
		"empty user":          {mutate: func(s *Spec) { s.User = "" }, want: "run as root"},
		"negative uid":        {mutate: func(s *Spec) { s.User = "-1" }, want: "numeric uid"},
		"relative entrypoint": {mutate: func(s *Spec) { s.Entrypoint = "flotilla" }, want: "absolute path"},
		"digest reference":    {mutate: func(s *Spec) { s.Ref = "ghcr.io/x/y@sha256:" + strings.Repeat("0", 64) }, want: "image reference"},
		"no binaries":         {mutate: func(s *Spec) { s.Binaries = nil }, want: "no binaries"},
		"windows":             {mutate: func(s *Spec) { s.Binaries = map[string]string{"windows/amd64": amd64} }, want: "only linux"},
		"bad platform":        {mutate: func(s *Spec) { s.Binaries = map[string]string{"amd64": amd64} }, want: "os/arch"},
		"unknown platform":    {platform: "linux/arm64", want: "no binary given"},
		"wrong architecture":  {mutate: func(s *Spec) { s.Binaries = map[string]string{"linux/arm64": amd64} }, want: "built for EM_X86_64"},
		"dynamic binary": {
			mutate: func(s *Spec) {
				s.Binaries = map[string]string{"linux/amd64": fakeELF(t, elf.EM_X86_64, "/lib64/ld-linux-x86-64.so.2")}
			},
			want: "dynamically linked (it needs /lib64/ld-linux-x86-64.so.2",
		},
		"not an executable": {
			mutate: func(s *Spec) { s.Binaries = map[string]string{"linux/amd64": filepath.Join(t.TempDir(), "missing")} },
			want:   "not a Linux executable",
		},
		"two platforms, none chosen": {
			mutate: func(s *Spec) { s.Binaries["linux/arm64"] = fakeELF(t, elf.EM_AARCH64, "") },
			want:   "2 platforms",
		},
	}
	for label, tc := range cases {
		t.Run(label, func(t *testing.T) {
			spec := testSpec(map[string]string{"linux/amd64": amd64})
			if tc.mutate != nil {
				tc.mutate(&spec)
			}
			out := filepath.Join(t.TempDir(), "image.tar")
			err := WriteTarball(spec, tc.platform, out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one saying %q", err, tc.want)
			}
			if _, statErr := os.Stat(out); !errors.Is(statErr, os.ErrNotExist) {
				t.Errorf("a refused build left %s behind", out)
			}
		})
	}

	t.Setenv(sourceDateEpochEnv, "yesterday")
	err := WriteTarball(testSpec(map[string]string{"linux/amd64": amd64}), "", filepath.Join(t.TempDir(), "x.tar"))
	if err == nil || !strings.Contains(err.Error(), sourceDateEpochEnv) {
		t.Errorf("SOURCE_DATE_EPOCH=yesterday: got %v", err)
	}
}

func multiArch(t *testing.T) Spec {
	return testSpec(map[string]string{
		"linux/arm64": fakeELF(t, elf.EM_AARCH64, ""),
		"linux/amd64": fakeELF(t, elf.EM_X86_64, ""),
	})
}

// checkIndex asserts idx lists an image of every platform, in a stable order, each with
// the matching config.
func checkIndex(t *testing.T, idx v1.ImageIndex) {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || len(im.Manifests) != 2 {
		t.Fatalf("index: media type %s with %d manifests, want an OCI index of 2", im.MediaType, len(im.Manifests))
	}
	for i, want := range []string{"linux/amd64", "linux/arm64"} {
		desc := im.Manifests[i]
		if desc.Platform == nil || desc.Platform.String() != want {
			t.Fatalf("manifest %d: platform %v, want %s", i, desc.Platform, want)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.OS + "/" + cfg.Architecture; got != want {
			t.Errorf("manifest %d: config says %s, want %s", i, got, want)
		}
	}
}

func TestWriteLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(multiArch(t), dir); err != nil {
		t.Fatal(err)
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Manifests) != 1 {
		t.Fatalf("index.json: %d entries, want one image index", len(rm.Manifests))
	}
	entry := rm.Manifests[0]
	if entry.Annotations[annotationRefName] != "0.0.1" || entry.Annotations[annotationContainerdName] != testRef {
		t.Errorf("index.json annotations: got %v", entry.Annotations)
	}
	idx, err := root.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, idx)
}

func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	spec := multiArch(t)
	spec.Ref = strings.TrimPrefix(srv.URL, "http://") + "/flotilla-dev/flotilla-test:0.0.1"
	if err := Push(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(spec.Ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, idx)
}
