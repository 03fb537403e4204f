// Command sbom writes the software bill of materials of Go binaries: the modules each was built
// from, read from the build information the Go linker embeds, as an SPDX 2.3 JSON document per
// binary. make release writes one beside each binary it ships.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"
)

const usage = `sbom: the modules a Go binary was built from, as SPDX 2.3 JSON.

Usage:
  go run ./hack/sbom BINARY OUT.spdx.json [BINARY OUT.spdx.json ...]

The document's creation time is SOURCE_DATE_EPOCH when set, else 1970-01-01, so that the same
binary gives the same document.
`

func main() {
	args := os.Args[1:]
	if len(args) == 0 || len(args)%2 != 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	created, err := creationTime(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	}
	for i := 0; i < len(args); i += 2 {
		if err := write(args[i], args[i+1], created); err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %s (%s)\n", args[i+1], args[i])
	}
}

// creationTime is SOURCE_DATE_EPOCH (seconds), or the Unix epoch when unset.
func creationTime(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a count of seconds: %w", epoch, err)
	}
	return time.Unix(s, 0).UTC(), nil
}

func write(binary, out string, created time.Time) error {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("reading the build information of %s: %w", binary, err)
	}
	sum, err := fileSHA256(binary)
	if err != nil {
		return err
	}
	doc := document(filepath.Base(binary), sum, info, created)
	raw, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the SBOM of %s: %w", binary, err)
	}
	return os.WriteFile(out, append(raw, '\n'), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SPDX 2.3's JSON form, the fields this document uses.
type (
	spdxDocument struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      spdxCreationInfo   `json:"creationInfo"`
		Packages          []spdxPackage      `json:"packages"`
		Relationships     []spdxRelationship `json:"relationships"`
	}
	spdxCreationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	spdxPackage struct {
		Name             string            `json:"name"`
		SPDXID           string            `json:"SPDXID"`
		VersionInfo      string            `json:"versionInfo,omitempty"`
		DownloadLocation string            `json:"downloadLocation"`
		FilesAnalyzed    bool              `json:"filesAnalyzed"`
		Checksums        []spdxChecksum    `json:"checksums,omitempty"`
		ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
		Comment          string            `json:"comment,omitempty"`
	}
	spdxChecksum struct {
		Algorithm string `json:"algorithm"`
		Value     string `json:"checksumValue"`
	}
	spdxExternalRef struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	spdxRelationship struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
)

var notIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// document is the SPDX document of one binary: the binary itself (its SHA-256), the main module
// it was built from and every module it links, each with its Go checksum and package URL, the
// binary containing the main module and the main module depending on each of the others.
func document(name, sha256sum string, info *buildinfo.BuildInfo, created time.Time) spdxDocument {
	bin := spdxPackage{Name: name, SPDXID: "SPDXRef-Binary", DownloadLocation: "NOASSERTION",
		Checksums: []spdxChecksum{{Algorithm: "SHA256", Value: sha256sum}},
		Comment:   fmt.Sprintf("built by %s for %s", info.GoVersion, platform(info))}
	main := module(&info.Main)
	main.SPDXID = "SPDXRef-Main"
	doc := spdxDocument{SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: name,
		DocumentNamespace: "https://github.com/flotilla-dev/flotilla/sbom/" + name + "-" + sha256sum,
		CreationInfo:      spdxCreationInfo{Created: created.Format(time.RFC3339), Creators: []string{"Tool: flotilla hack/sbom"}},
		Packages:          []spdxPackage{bin, main},
		Relationships: []spdxRelationship{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: bin.SPDXID},
			{Element: bin.SPDXID, Type: "CONTAINS", Related: main.SPDXID}}}
	stdlib := spdxPackage{Name: "stdlib", SPDXID: "SPDXRef-Module-stdlib", VersionInfo: info.GoVersion, DownloadLocation: "https://go.dev/dl/",
		ExternalRefs: []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/stdlib@" + info.GoVersion}}}
	doc.Packages = append(doc.Packages, stdlib)
	doc.Relationships = append(doc.Relationships, spdxRelationship{Element: main.SPDXID, Type: "DEPENDS_ON", Related: stdlib.SPDXID})
	for _, dep := range info.Deps {
		p := module(dep)
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: main.SPDXID, Type: "DEPENDS_ON", Related: p.SPDXID})
	}
	return doc
}

// module is a module's package: a replaced module is the one that replaced it.
func module(m *debug.Module) spdxPackage {
	used := m
	if m.Replace != nil {
		used = m.Replace
	}
	p := spdxPackage{Name: used.Path, SPDXID: "SPDXRef-Module-" + notIDChars.ReplaceAllString(used.Path+"-"+used.Version, "-"),
		VersionInfo: used.Version, DownloadLocation: "NOASSERTION"}
	if used.Version != "" && used.Version != "(devel)" {
		p.DownloadLocation = "https://proxy.golang.org/" + used.Path + "/@v/" + used.Version + ".zip"
		p.ExternalRefs = []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + used.Path + "@" + used.Version}}
	}
	if used.Sum != "" {
		p.Comment = "Go checksum " + used.Sum
	}
	if m.Replace != nil {
		p.Comment = joinNonEmpty(p.Comment, "replaces "+m.Path+" "+m.Version)
	}
	return p
}

func platform(info *buildinfo.BuildInfo) string {
	var goos, goarch string
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos == "" || goarch == "" {
		return "an unrecorded platform"
	}
	return goos + "/" + goarch
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
