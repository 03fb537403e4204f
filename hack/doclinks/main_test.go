package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAnchorsAsGitHubMakesThem(t *testing.T) {
	got := Anchors("# Installing, upgrading and uninstalling Flotilla\n## 4. Upgrade\n### The webhook's certificate from cert-manager\n" +
		"## `flotillactl doctor`: checks\n## Health\n## Health\n```\n# not a heading\n```\n<a name=\"kept\"></a>\n#### FlotillaManagerDown\n")
	for _, want := range []string{"installing-upgrading-and-uninstalling-flotilla", "4-upgrade", "the-webhooks-certificate-from-cert-manager",
		"flotillactl-doctor-checks", "health", "health-1", "kept", "flotillamanagerdown"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line of a code block became a heading")
	}
}

func TestCheckFindsBrokenLinksOnly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("docs/b.md", "# B\n## Some part\n")
	a := write("a.md", "[ok](docs/b.md#some-part) [folder](docs) [web](https://example.com/x#y) [self](#top)\n# Top\n"+
		"[gone](docs/c.md) [bad anchor](docs/b.md#other) `[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n")
	broken, err := check([]string{a})
	if err != nil {
		t.Fatal(err)
	}
	if len(broken) != 2 || !strings.Contains(broken[0], "docs/c.md: no such file") || !strings.Contains(broken[1], "#other") {
		t.Errorf("broken = %q, want docs/c.md and docs/b.md#other", broken)
	}
}

func TestSharedBlocksMustAgree(t *testing.T) {
	dir := t.TempDir()
	block := func(rows string) string {
		return "text\n<!-- shared:figures (kept in both) -->\n| a |\n" + rows + "\n<!-- /shared:figures -->\nmore\n"
	}
	a, b, c := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md"), filepath.Join(dir, "c.md")
	for path, text := range map[string]string{a: block("| 1 |"), b: block("| 1 |"), c: block("| 2 |")} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if differ, err := sharedBlocks([]string{a, b}); err != nil || len(differ) != 0 {
		t.Errorf("the same block: %q, %v", differ, err)
	}
	if differ, err := sharedBlocks([]string{a, c}); err != nil || len(differ) != 1 || !strings.Contains(differ[0], "shared block figures differs") {
		t.Errorf("different blocks: %q, %v", differ, err)
	}
	if _, err := SharedBlocks("<!-- shared:x -->\nno end\n"); err == nil {
		t.Error("an unclosed block was taken")
	}
}
