package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// SHA256SUMS must list every file with its checksum: a changed file, one left out and one listed
// but missing are each refused, by name.
func TestChecksumsListEveryFileWithItsSum(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(content))
		return hex.EncodeToString(sum[:])
	}
	a, b := write("a.tar.gz", "a"), write("b.tgz", "b")
	sums := func(lines ...string) {
		if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sums(a+"  a.tar.gz", b+"  b.tgz")
	if files, err := checkSums(dir); err != nil || len(files) != 2 {
		t.Fatalf("a release as listed: %v, %v", files, err)
	}
	write("b.tgz", "changed")
	write("c.json", "c")
	sums(a+"  a.tar.gz", b+"  b.tgz", a+"  gone.tar.gz")
	_, err := checkSums(dir)
	for _, want := range []string{"b.tgz: SHA-256", "c.json is not in SHA256SUMS", "lists gone.tar.gz, which is not there"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// A binary is judged by its format and architecture: this test's own binary is a Linux ELF of its
// architecture, and neither a Mach-O nor a Linux binary of the other architecture.
func TestABinaryIsJudgedByItsFormatAndArchitecture(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the test binary is a Linux ELF only on Linux")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := binaryFormat(self, "linux", runtime.GOARCH); err != nil {
		t.Errorf("this binary as linux/%s: %v", runtime.GOARCH, err)
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if _, err := binaryFormat(self, "linux", other); err == nil {
		t.Errorf("this binary passed as linux/%s", other)
	}
	if _, err := binaryFormat(self, "darwin", runtime.GOARCH); err == nil || !strings.Contains(err.Error(), "no Mach-O") {
		t.Errorf("this binary as darwin: %v", err)
	}
}
