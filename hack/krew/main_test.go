package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// archiveEntries lists the names and modes in a tar.gz.
func archiveEntries(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.ModTime.Unix() != 0 {
			t.Errorf("%s: owner %d:%d %q, mtime %v", hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.ModTime)
		}
		entries = append(entries, hdr.Name+" "+hdr.FileInfo().Mode().String())
	}
}

// TestRenderTemplate packs two platforms with the template of this directory and checks
// the archives, the manifest and that a second run gives the same bytes.
func TestRenderTemplate(t *testing.T) {
	src := t.TempDir()
	write := func(path, content string) string {
		t.Helper()
		p := filepath.Join(src, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	linux := write("linux/kubectl-flotilla", "linux binary")
	windows := write("windows/kubectl-flotilla.exe", "windows binary")
	license := write("LICENSE", "license text")
	o := options{
		template:  "flotilla.yaml.tmpl",
		version:   "0.1.0",
		urlPrefix: "https://example.com/download/0.1.0/",
		license:   license,
		binaries:  []string{"windows/amd64=" + windows, "linux/amd64=" + linux},
	}
	var manifests []string
	for range 2 {
		o.dir = t.TempDir()
		if err := run(o); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(o.dir, manifestName))
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, string(b))
	}
	if manifests[0] != manifests[1] {
		t.Error("two runs rendered different manifests (archives not reproducible?)")
	}
	m := manifests[0]
	for _, want := range []string{
		"version: v0.1.0",
		"uri: https://example.com/download/0.1.0/kubectl-flotilla_linux_amd64.tar.gz",
		"bin: kubectl-flotilla.exe",
		"- from: LICENSE",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("manifest lacks %q:\n%s", want, m)
		}
	}
	if i, j := strings.Index(m, "os: linux"), strings.Index(m, "os: windows"); i < 0 || j < i {
		t.Errorf("platforms not in a stable order:\n%s", m)
	}
	got := archiveEntries(t, filepath.Join(o.dir, "kubectl-flotilla_windows_amd64.tar.gz"))
	if want := "kubectl-flotilla.exe -rwxr-xr-x,LICENSE -rw-r--r--"; strings.Join(got, ",") != want {
		t.Errorf("archive: got %q, want %q", got, want)
	}
}

func TestRefused(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kubectl-flotilla")
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := options{template: "flotilla.yaml.tmpl", version: "0.1.0", urlPrefix: "https://example.com", binaries: []string{"linux/amd64=" + bin}}
	cases := map[string]struct {
		mutate func(*options)
		want   string
	}{
		"version":          {func(o *options) { o.version = "latest" }, "semantic version"},
		"no binary":        {func(o *options) { o.binaries = nil }, "at least one --binary"},
		"bad platform":     {func(o *options) { o.binaries = []string{"linux=" + bin} }, "OS/ARCH=PATH"},
		"windows no .exe":  {func(o *options) { o.binaries = []string{"windows/amd64=" + bin} }, ".exe on windows"},
		"template missing": {func(o *options) { o.template = "nope.tmpl" }, "reading the template"},
		"bad template field": {func(o *options) {
			o.template = filepath.Join(t.TempDir(), "bad.tmpl")
			if err := os.WriteFile(o.template, []byte("{{ .Nope }}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "rendering"},
		"template drops a platform": {func(o *options) {
			o.template = filepath.Join(t.TempDir(), "short.tmpl")
			text, err := os.ReadFile("flotilla.yaml.tmpl")
			if err != nil {
				t.Fatal(err)
			}
			short := bytes.Replace(text, []byte("{{- range .Platforms }}"), []byte("{{- range slice .Platforms 1 }}"), 1)
			if err := os.WriteFile(o.template, short, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "0 platforms, want 1"},
	}
	for label, tc := range cases {
		t.Run(label, func(t *testing.T) {
			o := base
			o.dir = t.TempDir()
			tc.mutate(&o)
			if err := run(o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
