package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// The SBOM of a real Go binary (this test's): the binary with its SHA-256, the main module, the
// standard library and every module the binary links, each a package the main module depends on
// with its package URL; the same binary gives the same document.
func TestTheSBOMOfABinaryListsEveryModuleItLinks(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "self.spdx.json")
	created := time.Unix(1700000000, 0).UTC()
	if err := write(self, out, created); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDocument
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	sum, err := fileSHA256(self)
	if err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("version %q, created %q", doc.SPDXVersion, doc.CreationInfo.Created)
	}
	if doc.Packages[0].SPDXID != "SPDXRef-Binary" || doc.Packages[0].Checksums[0].Value != sum {
		t.Errorf("the binary's package %+v, want its SHA-256 %s", doc.Packages[0], sum)
	}
	names := map[string]spdxPackage{}
	for _, p := range doc.Packages {
		names[p.Name] = p
	}
	// This test's binary links the standard library and the main module (hack/sbom imports no
	// other); a binary that links modules lists each (make release writes the manager's).
	if p, ok := names["stdlib"]; !ok || !strings.HasPrefix(p.VersionInfo, "go1.") {
		t.Errorf("no stdlib package of a Go version: %+v", p)
	}
	if _, ok := names["github.com/flotilla-dev/flotilla"]; !ok {
		t.Errorf("no main module among %v", doc.Packages)
	}
	depends := 0
	for _, r := range doc.Relationships {
		if r.Type == "DEPENDS_ON" && r.Element == "SPDXRef-Main" {
			depends++
		}
	}
	if depends != len(doc.Packages)-2 {
		t.Errorf("%d DEPENDS_ON relationships for %d packages beside the binary and the main module", depends, len(doc.Packages)-2)
	}
	again := filepath.Join(t.TempDir(), "again.spdx.json")
	if err := write(self, again, created); err != nil {
		t.Fatal(err)
	}
	if raw2, _ := os.ReadFile(again); string(raw2) != string(raw) {
		t.Error("the same binary gave two documents")
	}
}

// A module replaced in go.mod is listed as its replacement, saying what it replaces.
func TestAReplacedModuleIsItsReplacement(t *testing.T) {
	p := module(&debugModule{Path: "k8s.io/api", Version: "v0.0.0", Replace: &debugModule{Path: "k8s.io/api", Version: "v0.35.4", Sum: "h1:abc="}})
	if p.VersionInfo != "v0.35.4" || p.ExternalRefs[0].Locator != "pkg:golang/k8s.io/api@v0.35.4" ||
		!strings.Contains(p.Comment, "Go checksum h1:abc=") || !strings.Contains(p.Comment, "replaces k8s.io/api v0.0.0") {
		t.Errorf("%+v", p)
	}
	if p := module(&debugModule{Path: "example.com/local", Version: "(devel)"}); p.DownloadLocation != "NOASSERTION" || len(p.ExternalRefs) != 0 {
		t.Errorf("a module of no version: %+v", p)
	}
}

type debugModule = debug.Module
