// Command doclinks checks the repository's Markdown files (git ls-files '*.md'): every relative
// link names a file or folder that exists, and an anchor a heading of that file, as GitHub makes
// anchors; and every block shared between files (between <!-- shared:NAME --> and
// <!-- /shared:NAME -->, the README's figures and docs/benchmarks.md's, say) is the same in each.
// `make verify` runs it; it prints each problem with where it is and exits 1 when there is one.
package main

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

func main() {
	out, err := exec.Command("git", "ls-files", "*.md").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks: listing the Markdown files:", err)
		os.Exit(2)
	}
	files := strings.Fields(string(out))
	broken, err := check(files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(2)
	}
	differ, err := sharedBlocks(files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(2)
	}
	broken = append(broken, differ...)
	for _, b := range broken {
		fmt.Println(b)
	}
	if len(broken) > 0 {
		fmt.Printf("doclinks: %d problems in %d Markdown files\n", len(broken), len(files))
		os.Exit(1)
	}
}

// linkPattern finds inline links and images: [text](target "title").
var linkPattern = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// check returns every broken relative link of files, as "file:line: link: why".
func check(files []string) ([]string, error) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := Anchors(string(raw))
		anchors[path] = a
		return a, nil
	}
	var broken []string
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		fence := false
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fence = !fence
				continue
			}
			if fence {
				continue
			}
			for _, m := range linkPattern.FindAllStringSubmatch(withoutCode(line), -1) {
				if why := checkLink(file, m[1], anchorsOf); why != "" {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: %s", file, n, m[1], why))
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
	}
	return broken, nil
}

// withoutCode blanks a line's inline code spans, whose brackets are no links.
func withoutCode(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		parts[i] = strings.Repeat(" ", len(parts[i]))
	}
	return strings.Join(parts, "`")
}

// checkLink says why a link of file is broken ("" when it is not, or is not relative).
func checkLink(file, target string, anchorsOf func(string) (map[string]bool, error)) string {
	u, err := url.Parse(target)
	if err != nil {
		return "does not parse: " + err.Error()
	}
	if u.Scheme != "" || u.Host != "" || strings.HasPrefix(target, "//") {
		return "" // absolute: not checked here (no network)
	}
	path := file
	if u.Path != "" {
		path = filepath.Join(filepath.Dir(file), filepath.FromSlash(u.Path))
		st, err := os.Stat(path)
		if err != nil {
			return "no such file or folder"
		}
		if st.IsDir() {
			if u.Fragment != "" {
				return "an anchor into a folder"
			}
			return ""
		}
	}
	if u.Fragment == "" || !strings.HasSuffix(path, ".md") {
		return ""
	}
	a, err := anchorsOf(path)
	if err != nil {
		return err.Error()
	}
	if !a[u.Fragment] {
		return "no heading of " + path + " has the anchor #" + u.Fragment
	}
	return ""
}

var (
	headingPattern  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	headingLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	explicitAnchor  = regexp.MustCompile(`<a (?:name|id)="([^"]+)"`)
)

// Anchors are the anchors GitHub gives a Markdown text's headings (and explicit <a name>): the
// heading's text lower-cased, links and code reduced to their text, every character but letters,
// digits, spaces, '-' and '_' dropped, spaces made '-'; a repeated one gets -1, -2, ...
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		for _, m := range explicitAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingPattern.FindStringSubmatch(line)
		if fence || m == nil {
			continue
		}
		h := headingLinkText.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor]++
			anchor = fmt.Sprintf("%s-%d", anchor, n)
		} else {
			seen[anchor] = 1
		}
		out[anchor] = true
	}
	return out
}

var sharedMarker = regexp.MustCompile(`^<!-- (/?)shared:([a-z0-9-]+)\b.*-->\s*$`)

// sharedBlocks returns, for each shared block whose copies differ, where they are.
func sharedBlocks(files []string) ([]string, error) {
	type copyOf struct{ file, text string }
	blocks := map[string][]copyOf{}
	var names []string
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		found, err := SharedBlocks(string(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for name, text := range found {
			if _, ok := blocks[name]; !ok {
				names = append(names, name)
			}
			blocks[name] = append(blocks[name], copyOf{file, text})
		}
	}
	var out []string
	for _, name := range names {
		copies := blocks[name]
		for _, c := range copies[1:] {
			if c.text != copies[0].text {
				out = append(out, fmt.Sprintf("%s: shared block %s differs from the one in %s", c.file, name, copies[0].file))
			}
		}
	}
	return out, nil
}

// SharedBlocks are a Markdown text's shared blocks by name: the lines between their markers.
func SharedBlocks(text string) (map[string]string, error) {
	out := map[string]string{}
	open, start := "", 0
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		m := sharedMarker.FindStringSubmatch(strings.TrimSpace(line))
		switch {
		case m == nil:
		case m[1] == "" && open == "":
			open, start = m[2], i+1
		case m[1] == "/" && m[2] == open:
			out[open] = strings.Join(lines[start:i], "\n")
			open = ""
		default:
			return nil, fmt.Errorf("line %d: marker %q out of place", i+1, line)
		}
	}
	if open != "" {
		return nil, fmt.Errorf("shared block %s is not closed", open)
	}
	return out, nil
}
