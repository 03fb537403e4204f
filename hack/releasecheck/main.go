// Command releasecheck checks what make release wrote before anything of it is published:
// SHA256SUMS lists every file with its checksum; each image of the manager's OCI layout holds
// /flotilla-manager built for the image's platform, static; each flotillactl archive holds a
// binary for its OS and architecture; the chart archive holds the chart of the release's version.
package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/releasecheck RELEASE_DIR VERSION")
		os.Exit(2)
	}
	if err := check(os.Args[1], os.Args[2], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release check:", err)
		os.Exit(1)
	}
}

func check(dir, version string, out io.Writer) error {
	files, err := checkSums(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		path := filepath.Join(dir, f)
		var what string
		var err error
		switch {
		case strings.HasSuffix(f, "_oci.tar"):
			what, err = checkImage(path)
		case strings.HasPrefix(f, "flotillactl_") && strings.HasSuffix(f, ".tar.gz"):
			what, err = checkCLI(path, strings.TrimSuffix(strings.TrimPrefix(f, "flotillactl_"+version+"_"), ".tar.gz"))
		case f == "flotilla-"+version+".tgz":
			what, err = checkChart(path, version)
		default:
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		fmt.Fprintf(out, "%s: %s\n", f, what)
	}
	for _, want := range []string{"flotilla-manager_" + version + "_oci.tar", "flotilla-" + version + ".tgz"} {
		if !slices.Contains(files, want) {
			errs = append(errs, fmt.Errorf("no %s", want))
		}
	}
	return errors.Join(errs...)
}

// checkSums verifies SHA256SUMS: every other file of dir listed once, each with its SHA-256.
func checkSums(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	listed := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("SHA256SUMS: %q is not SUM  FILE", sc.Text())
		}
		listed[name] = sum
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	var errs []error
	for _, e := range entries {
		if e.Name() == "SHA256SUMS" {
			continue
		}
		files = append(files, e.Name())
		sum, ok := listed[e.Name()]
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not in SHA256SUMS", e.Name()))
			continue
		}
		delete(listed, e.Name())
		got, err := fileSum(filepath.Join(dir, e.Name()))
		if err != nil {
			errs = append(errs, err)
		} else if got != sum {
			errs = append(errs, fmt.Errorf("%s: SHA-256 %s, SHA256SUMS says %s", e.Name(), got, sum))
		}
	}
	for name := range listed {
		errs = append(errs, fmt.Errorf("SHA256SUMS lists %s, which is not there", name))
	}
	return files, errors.Join(errs...)
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkImage opens the OCI layout an archive holds and checks each platform's image: its
// /flotilla-manager is a static ELF executable for that architecture.
func checkImage(path string) (string, error) {
	dir, err := os.MkdirTemp("", "releasecheck-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := untar(f, dir); err != nil {
		return "", err
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return "", fmt.Errorf("not an OCI layout: %w", err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return "", err
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(topManifest.Manifests) != 1 {
		return "", fmt.Errorf("the layout names %d entries, want one image index", len(topManifest.Manifests))
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		return "", fmt.Errorf("its entry is no image index: %w", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	var platforms []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			return "", fmt.Errorf("image %s names no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return "", err
		}
		if err := checkManagerBinary(img, d.Platform.Architecture); err != nil {
			return "", fmt.Errorf("%s: %w", d.Platform, err)
		}
		platforms = append(platforms, d.Platform.String())
	}
	return fmt.Sprintf("an image index of %s, each /flotilla-manager a static ELF of its architecture", strings.Join(platforms, ", ")), nil
}

var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func checkManagerBinary(img v1.Image, arch string) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		tmp, found, err := extract(rc, "flotilla-manager")
		rc.Close()
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		defer os.Remove(tmp)
		ef, err := elf.Open(tmp)
		if err != nil {
			return fmt.Errorf("/flotilla-manager is no ELF: %w", err)
		}
		defer ef.Close()
		if want, ok := elfMachines[arch]; !ok || ef.Machine != want {
			return fmt.Errorf("/flotilla-manager is built for %s", ef.Machine)
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				return errors.New("/flotilla-manager is dynamically linked")
			}
		}
		return nil
	}
	return errors.New("no /flotilla-manager in its layers")
}

// checkCLI checks that a flotillactl archive of platform os_arch holds a binary for it.
func checkCLI(path, platform string) (string, error) {
	goos, arch, ok := strings.Cut(platform, "_")
	if !ok {
		return "", fmt.Errorf("no OS_ARCH in its name")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", err
	}
	name := "flotillactl"
	if goos == "windows" {
		name += ".exe"
	}
	tmp, found, err := extract(zr, name)
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("no %s in it", name)
	}
	defer os.Remove(tmp)
	format, err := binaryFormat(tmp, goos, arch)
	if err != nil {
		return "", err
	}
	return name + ", " + format, nil
}

func binaryFormat(path, goos, arch string) (string, error) {
	switch goos {
	case "linux":
		f, err := elf.Open(path)
		if err != nil {
			return "", fmt.Errorf("no ELF: %w", err)
		}
		defer f.Close()
		if f.Machine != elfMachines[arch] {
			return "", fmt.Errorf("an ELF for %s, not %s", f.Machine, arch)
		}
		return "ELF " + f.Machine.String(), nil
	case "darwin":
		f, err := macho.Open(path)
		if err != nil {
			return "", fmt.Errorf("no Mach-O: %w", err)
		}
		defer f.Close()
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[arch]
		if f.Cpu != want {
			return "", fmt.Errorf("a Mach-O for %s, not %s", f.Cpu, arch)
		}
		return "Mach-O " + f.Cpu.String(), nil
	case "windows":
		f, err := pe.Open(path)
		if err != nil {
			return "", fmt.Errorf("no PE: %w", err)
		}
		defer f.Close()
		want := map[string]uint16{"amd64": pe.IMAGE_FILE_MACHINE_AMD64, "arm64": pe.IMAGE_FILE_MACHINE_ARM64}[arch]
		if f.Machine != want {
			return "", fmt.Errorf("a PE for machine %#x, not %s", f.Machine, arch)
		}
		return fmt.Sprintf("PE machine %#x", f.Machine), nil
	}
	return "", fmt.Errorf("unknown OS %s", goos)
}

// checkChart checks the chart archive: flotilla/Chart.yaml of the release's version.
func checkChart(path, version string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", err
	}
	tmp, found, err := extract(zr, "flotilla/Chart.yaml")
	if err != nil || !found {
		return "", errors.Join(err, errors.New("no flotilla/Chart.yaml"))
	}
	defer os.Remove(tmp)
	raw, err := os.ReadFile(tmp)
	if err != nil {
		return "", err
	}
	lines := strings.Split(string(raw), "\n")
	for _, key := range []string{"version", "appVersion"} {
		if !slices.ContainsFunc(lines, func(l string) bool {
			v, ok := strings.CutPrefix(l, key+":")
			return ok && strings.Trim(strings.TrimSpace(v), `"'`) == version
		}) {
			return "", fmt.Errorf("its Chart.yaml has no %s: %s", key, version)
		}
	}
	return "the chart, version and appVersion " + version, nil
}

// extract copies the tar entry named name (a path, leading "./" or "/" ignored) to a temporary
// file; found is false when the archive has none.
func extract(r io.Reader, name string) (string, bool, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		if strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/") != name || h.Typeflag != tar.TypeReg {
			continue
		}
		tmp, err := os.CreateTemp("", "releasecheck-")
		if err != nil {
			return "", false, err
		}
		if _, err := io.Copy(tmp, io.LimitReader(tr, 1<<30)); err != nil {
			tmp.Close()
			return "", false, err
		}
		return tmp.Name(), true, tmp.Close()
	}
}

// untar writes a tar's regular files and folders under dir, refusing paths that leave it.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o750); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
				return err
			}
			f, err := os.Create(target)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, io.LimitReader(tr, 1<<30)); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
}
