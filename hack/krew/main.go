// Command krew packs the kubectl-flotilla plugin into one tar.gz per platform and renders
// its Krew manifest from a template with each archive's URI and sha256, then reads the
// manifest back to check it names every archive as written. make plugin runs it.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

const usage = `Pack kubectl plugin binaries into archives and render their Krew manifest.

For each --binary OS/ARCH=PATH it writes DIR/<name>_<os>_<arch>.tar.gz holding the binary
(and --license when given), reproducibly (owner 0:0, timestamps from SOURCE_DATE_EPOCH,
else the Unix epoch), then renders --template into DIR/flotilla.yaml with each archive's
URI (--url-prefix/<archive>) and sha256.

Example:
  go run ./hack/krew --template hack/krew/flotilla.yaml.tmpl --version 0.1.0 \
    --url-prefix https://github.com/flotilla-dev/flotilla/releases/download/0.1.0 \
    --dir bin/plugin --binary linux/amd64=bin/plugin/linux_amd64/kubectl-flotilla

Flags:
`

// manifestName is the rendered manifest's file name: Krew wants <plugin name>.yaml.
const manifestName = "flotilla.yaml"

// semver is what Krew accepts as spec.version.
var semver = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

type options struct {
	template  string
	version   string
	urlPrefix string
	dir       string
	license   string
	binaries  []string
}

// platform is one entry of the manifest's spec.platforms, as the template sees it.
type platform struct {
	OS, Arch, URI, SHA256, Bin string
	Files                      []string
}

func main() {
	var o options
	fs := pflag.NewFlagSet("krew", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&o.template, "template", "hack/krew/flotilla.yaml.tmpl", "Krew manifest template (Go text/template)")
	fs.StringVar(&o.version, "version", "", "plugin version, e.g. 0.1.0 (Krew gets it as v0.1.0)")
	fs.StringVar(&o.urlPrefix, "url-prefix", "", "URL the archives are downloaded from, e.g. a GitHub release's download URL")
	fs.StringVar(&o.dir, "dir", "bin/plugin", "directory of the archives and the manifest")
	fs.StringVar(&o.license, "license", "", "license file to put in every archive (optional)")
	fs.StringArrayVar(&o.binaries, "binary", nil, "OS/ARCH=PATH of a plugin binary named kubectl-<plugin>[.exe] (repeat per platform)")
	fs.Usage = func() {
		fmt.Fprint(os.Stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	version := "v" + strings.TrimPrefix(o.version, "v")
	if !semver.MatchString(version) {
		return fmt.Errorf("--version %q: Krew wants a semantic version such as 0.1.0", o.version)
	}
	if o.urlPrefix == "" || len(o.binaries) == 0 {
		return errors.New("--url-prefix and at least one --binary are needed (see --help)")
	}
	mtime, err := buildTime()
	if err != nil {
		return err
	}
	sort.Strings(o.binaries) // the manifest lists platforms in one order every build
	var platforms []platform
	for _, arg := range o.binaries {
		p, err := pack(o, arg, mtime)
		if err != nil {
			return err
		}
		platforms = append(platforms, p)
	}
	manifest, err := render(o.template, version, platforms)
	if err != nil {
		return err
	}
	if err := check(manifest, version, platforms); err != nil {
		return fmt.Errorf("rendered manifest from %s: %w", o.template, err)
	}
	out := filepath.Join(o.dir, manifestName)
	if err := os.WriteFile(out, manifest, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	for _, p := range platforms {
		fmt.Printf("%s  %s\n", p.SHA256, filepath.Join(o.dir, filepath.Base(p.URI)))
	}
	fmt.Printf("wrote %s (%s, platforms: %d)\n", out, version, len(platforms))
	return nil
}

// pack writes the archive of one OS/ARCH=PATH argument.
func pack(o options, arg string, mtime time.Time) (platform, error) {
	plat, path, ok := strings.Cut(arg, "=")
	goos, arch, ok2 := strings.Cut(plat, "/")
	if !ok || !ok2 || goos == "" || arch == "" || path == "" || strings.Contains(arch, "/") {
		return platform{}, fmt.Errorf("--binary %q: want OS/ARCH=PATH, such as linux/amd64=bin/kubectl-flotilla", arg)
	}
	bin := filepath.Base(path)
	plugin := strings.TrimSuffix(bin, ".exe")
	if !strings.HasPrefix(plugin, "kubectl-") || (goos == "windows") != strings.HasSuffix(bin, ".exe") {
		return platform{}, fmt.Errorf("--binary %q: kubectl finds a plugin named kubectl-<name>, with .exe on windows only", arg)
	}
	files := []archived{{name: bin, path: path, mode: 0o755}}
	if o.license != "" {
		files = append(files, archived{name: filepath.Base(o.license), path: o.license, mode: 0o644})
	}
	archive := filepath.Join(o.dir, fmt.Sprintf("%s_%s_%s.tar.gz", plugin, goos, arch))
	sum, err := writeArchive(archive, files, mtime)
	if err != nil {
		return platform{}, err
	}
	p := platform{
		OS:     goos,
		Arch:   arch,
		URI:    strings.TrimSuffix(o.urlPrefix, "/") + "/" + filepath.Base(archive),
		SHA256: sum,
		Bin:    bin,
	}
	for _, f := range files {
		p.Files = append(p.Files, f.name)
	}
	return p, nil
}

// archived is one file of an archive.
type archived struct {
	name, path string
	mode       int64
}

// writeArchive writes files into a tar.gz at out, owned by 0:0 with no names and every
// timestamp at mtime, so that the same binaries give the same sha256; it returns that sum.
func writeArchive(out string, files []archived, mtime time.Time) (string, error) {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("directory of %s: %w", out, err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		content, err := os.ReadFile(f.path)
		if err != nil {
			return "", fmt.Errorf("archive %s: %w", out, err)
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(content)), ModTime: mtime}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", fmt.Errorf("archive %s: %w", out, err)
		}
		if _, err := tw.Write(content); err != nil {
			return "", fmt.Errorf("archive %s: %w", out, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("archive %s: %w", out, err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("archive %s: %w", out, err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", out, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// render executes the template; a field it names that does not exist is an error.
func render(path, version string, platforms []platform) ([]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the template: %w", err)
	}
	tmpl, err := template.New(filepath.Base(path)).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	var buf bytes.Buffer
	data := struct {
		Version   string
		Platforms []platform
	}{version, platforms}
	if err := tmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", path, err)
	}
	return buf.Bytes(), nil
}

// krewManifest holds the fields of a Krew Plugin the template writes; it is read strictly,
// so that a misspelt field fails here.
type krewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// check reads the manifest back, as Krew would, and compares it with what was packed: a
// template edit that breaks the YAML or drops a platform fails here, not at krew install.
func check(manifest []byte, version string, want []platform) error {
	var m krewManifest
	if err := yaml.UnmarshalStrict(manifest, &m); err != nil {
		return fmt.Errorf("not a valid manifest: %w", err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "flotilla" {
		return fmt.Errorf("got %s %s %q, want a krew v1alpha2 Plugin named flotilla", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if m.Spec.Version != version || m.Spec.ShortDescription == "" {
		return fmt.Errorf("spec.version %q (want %s) or an empty shortDescription", m.Spec.Version, version)
	}
	if len(m.Spec.Platforms) != len(want) {
		return fmt.Errorf("%d platforms, want %d", len(m.Spec.Platforms), len(want))
	}
	for i, got := range m.Spec.Platforms {
		w := want[i]
		labels := got.Selector.MatchLabels
		if labels["os"] != w.OS || labels["arch"] != w.Arch || got.URI != w.URI || got.SHA256 != w.SHA256 || got.Bin != w.Bin {
			return fmt.Errorf("platform %d: got %v %s %s bin %s, want %s/%s %s %s bin %s", i,
				labels, got.URI, got.SHA256, got.Bin, w.OS, w.Arch, w.URI, w.SHA256, w.Bin)
		}
		var from []string
		for _, f := range got.Files {
			from = append(from, f.From)
		}
		if strings.Join(from, " ") != strings.Join(w.Files, " ") {
			return fmt.Errorf("platform %s/%s: files %v, want the archive's %v", w.OS, w.Arch, from, w.Files)
		}
	}
	return nil
}

// buildTime is SOURCE_DATE_EPOCH when set, else the Unix epoch (as internal/ociimage).
func buildTime() (time.Time, error) {
	env := os.Getenv("SOURCE_DATE_EPOCH")
	if env == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	secs, err := strconv.ParseInt(env, 10, 64)
	if err != nil || secs < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since the Unix epoch", env)
	}
	return time.Unix(secs, 0).UTC(), nil
}
