package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// runScript runs a script of simple commands separated by ";", "&&" or "||", left to right as a
// POSIX shell does for such a list. Words are split on blanks; single and double quotes group
// words (no expansions but $VAR and ${VAR} outside single quotes).
func runScript(script string, stdout, stderr io.Writer) int {
	code := 0
	op := ";"
	for _, part := range splitList(script) {
		if part.op != "" {
			op = part.op
			continue
		}
		if (op == "&&" && code != 0) || (op == "||" && code == 0) {
			continue
		}
		words, err := splitWords(part.text)
		if err != nil {
			fmt.Fprintln(stderr, "sh:", err)
			return 2
		}
		if len(words) == 0 {
			continue
		}
		if words[0] == "exit" {
			code = 0
			if len(words) > 1 {
				code, _ = strconv.Atoi(words[1])
			}
			return code
		}
		code = applet(words[0], words[1:], stdout, stderr)
	}
	return code
}

// listPart is a command of a list, or the operator after it.
type listPart struct{ text, op string }

// splitList splits a script at ;, && and || outside quotes.
func splitList(s string) []listPart {
	var out []listPart
	var cur strings.Builder
	quote := byte(0)
	flush := func() {
		if t := strings.TrimSpace(cur.String()); t != "" {
			out = append(out, listPart{text: t})
		}
		cur.Reset()
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote = c
			cur.WriteByte(c)
		case c == ';' || c == '\n':
			flush()
			out = append(out, listPart{op: ";"})
		case (c == '&' || c == '|') && i+1 < len(s) && s[i+1] == c:
			flush()
			out = append(out, listPart{op: string([]byte{c, c})})
			i++
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return out
}

// splitWords splits a command into words, honouring quotes and expanding $VAR outside single quotes.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '$' && i+1 < len(s):
			name, n := varName(s[i+1:])
			if n == 0 {
				cur.WriteByte(c)
				break
			}
			cur.WriteString(os.Getenv(name))
			inWord = true
			i += n
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// varName reads a variable name after $: NAME or {NAME}; n is how many bytes it took.
func varName(s string) (name string, n int) {
	if strings.HasPrefix(s, "{") {
		if end := strings.IndexByte(s, '}'); end > 1 {
			return s[1:end], end + 1
		}
		return "", 0
	}
	for n < len(s) && (s[n] == '_' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= 'a' && s[n] <= 'z' || n > 0 && s[n] >= '0' && s[n] <= '9') {
		n++
	}
	return s[:n], n
}

// appletFunc is one simple command: its arguments, its output streams, its exit code.
type appletFunc func(args []string, stdout, stderr io.Writer) int

// applets are the simple commands by name (also the image's links in /bin); set in init, as some
// call applet.
var applets map[string]appletFunc

func init() {
	applets = map[string]appletFunc{
		"echo":     echo,
		"sleep":    func(args []string, _, stderr io.Writer) int { return sleep(args, stderr) },
		"true":     func([]string, io.Writer, io.Writer) int { return 0 },
		"false":    func([]string, io.Writer, io.Writer) int { return 1 },
		"exit":     exit,
		"hostname": hostname,
		"env":      env,
		"printenv": func(args []string, stdout, _ io.Writer) int { return printenv(args, stdout) },
		"cat":      cat,
		"tty":      func(_ []string, stdout, _ io.Writer) int { return tty(stdout) },
		"spin":     func(args []string, _, stderr io.Writer) int { return spin(args, stderr) },
		"ls":       ls,
		"test":     func(args []string, _, stderr io.Writer) int { return test(args, stderr) },
		"[":        bracket,
		"wget":     wget,
	}
}

// applet runs one of the simple commands and returns its exit code.
func applet(name string, args []string, stdout, stderr io.Writer) int {
	if f, ok := applets[name]; ok {
		return f(args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "%s: not found\n", name)
	return 127
}

func echo(args []string, stdout, _ io.Writer) int {
	newline := true
	if len(args) > 0 && args[0] == "-n" {
		newline, args = false, args[1:]
	}
	fmt.Fprint(stdout, strings.Join(args, " "))
	if newline {
		fmt.Fprintln(stdout)
	}
	return 0
}

func exit(args []string, _, _ io.Writer) int {
	code := 0
	if len(args) > 0 {
		code, _ = strconv.Atoi(args[0])
	}
	return code
}

func hostname(_ []string, stdout, stderr io.Writer) int {
	h, err := os.Hostname()
	if err != nil {
		fmt.Fprintln(stderr, "hostname:", err)
		return 1
	}
	fmt.Fprintln(stdout, h)
	return 0
}

func env(_ []string, stdout, _ io.Writer) int {
	for _, kv := range os.Environ() {
		fmt.Fprintln(stdout, kv)
	}
	return 0
}

// bracket is test spelled [ ... ].
func bracket(args []string, _, stderr io.Writer) int {
	if len(args) == 0 || args[len(args)-1] != "]" {
		fmt.Fprintln(stderr, "[: missing ]")
		return 2
	}
	return test(args[:len(args)-1], stderr)
}

// sleep sleeps for seconds (fractions allowed) or "infinity".
func sleep(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "sleep: want one duration in seconds")
		return 2
	}
	if args[0] == "infinity" {
		select {}
	}
	s, err := strconv.ParseFloat(strings.TrimSuffix(args[0], "s"), 64)
	if err != nil || s < 0 {
		fmt.Fprintf(stderr, "sleep: invalid time interval %q\n", args[0])
		return 1
	}
	time.Sleep(time.Duration(s * float64(time.Second)))
	return 0
}

func printenv(args []string, stdout io.Writer) int {
	code := 0
	for _, name := range args {
		v, ok := os.LookupEnv(name)
		if !ok {
			code = 1
			continue
		}
		fmt.Fprintln(stdout, v)
	}
	return code
}

// wget fetches a URL to stdout, as busybox's `wget -qO- URL` (and `-q -O -`); a status other
// than 2xx fails, as it does there.
func wget(args []string, stdout, stderr io.Writer) int {
	var url string
	for _, a := range args {
		switch a {
		case "-q", "-O-", "-qO-", "-O", "-":
		default:
			url = a
		}
	}
	if url == "" {
		fmt.Fprintln(stderr, "wget: want a URL (wget -qO- URL)")
		return 2
	}
	// A connection per call, as each busybox wget is a process of its own: a Service spreads calls.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(stderr, "wget:", err)
		return 1
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(stdout, resp.Body)
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "wget: server returned error: HTTP %d\n", resp.StatusCode)
		return 1
	}
	return 0
}

func cat(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"-"}
	}
	code := 0
	for _, p := range args {
		if p == "-" {
			if _, err := io.Copy(stdout, os.Stdin); err != nil {
				fmt.Fprintln(stderr, "cat:", err)
				code = 1
			}
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintln(stderr, "cat:", err)
			code = 1
			continue
		}
		_, _ = stdout.Write(b)
	}
	return code
}

// interactive runs each line read from in as a script, as a shell reading its standard input
// does, until end of input or `exit`; with a terminal it prompts first.
func interactive(in io.Reader, stdout, stderr io.Writer, prompt bool) int {
	code := 0
	lines := bufio.NewScanner(in)
	for {
		if prompt {
			fmt.Fprint(stdout, "$ ")
		}
		if !lines.Scan() {
			return code
		}
		line := strings.TrimSpace(lines.Text())
		if line == "exit" || strings.HasPrefix(line, "exit ") {
			return runScript(line, stdout, stderr)
		}
		code = runScript(line, stdout, stderr)
	}
}

// tty prints the terminal on standard input, or "not a tty" and exits 1, as coreutils' does.
func tty(stdout io.Writer) int {
	if !isTerminal(os.Stdin) {
		fmt.Fprintln(stdout, "not a tty")
		return 1
	}
	name, err := os.Readlink("/proc/self/fd/0")
	if err != nil {
		name = "/dev/tty"
	}
	fmt.Fprintln(stdout, name)
	return 0
}

// isTerminal is whether f is a terminal: the TCGETS ioctl answers only for one.
func isTerminal(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}

// spin keeps one CPU busy PERCENT of the time, for ever: a container's real usage for the
// metrics API (kubectl top, an HPA).
func spin(args []string, stderr io.Writer) int {
	percent := 0
	if len(args) == 1 {
		percent, _ = strconv.Atoi(args[0])
	}
	if percent <= 0 || percent > 100 {
		fmt.Fprintln(stderr, "spin: want a percentage of one CPU, 1 to 100")
		return 2
	}
	const period = 100 * time.Millisecond
	busy := period * time.Duration(percent) / 100
	spins := 0
	for {
		start := time.Now()
		for time.Since(start) < busy {
			spins++ // the work: asking the clock
		}
		time.Sleep(period - busy)
	}
}

// ls lists the names in each directory (the current one without arguments), one per line, as
// busybox's ls does when its output is not a terminal; a file is listed as itself.
func ls(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"."}
	}
	code := 0
	for _, p := range args {
		info, err := os.Stat(p)
		if err != nil {
			fmt.Fprintln(stderr, "ls:", err)
			code = 1
			continue
		}
		if !info.IsDir() {
			fmt.Fprintln(stdout, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			fmt.Fprintln(stderr, "ls:", err)
			code = 1
			continue
		}
		for _, e := range entries {
			fmt.Fprintln(stdout, e.Name())
		}
	}
	return code
}

// test evaluates what the peers' scripts ask of test and [: STRING, -n STRING, -z STRING,
// A = B, A != B, -e/-f/-d PATH, and ! EXPR; 0 for true, 1 for false, 2 for what it cannot read.
func test(args []string, stderr io.Writer) int {
	result := func(b bool) int {
		if b {
			return 0
		}
		return 1
	}
	if len(args) > 0 && args[0] == "!" {
		code := test(args[1:], stderr)
		if code == 2 {
			return 2
		}
		return 1 - code
	}
	switch len(args) {
	case 0:
		return 1
	case 1:
		return result(args[0] != "")
	case 2:
		switch args[0] {
		case "-n":
			return result(args[1] != "")
		case "-z":
			return result(args[1] == "")
		case "-e", "-f", "-d":
			info, err := os.Stat(args[1])
			return result(err == nil && (args[0] == "-e" || (args[0] == "-d") == info.IsDir()))
		}
	case 3:
		switch args[1] {
		case "=", "==":
			return result(args[0] == args[2])
		case "!=":
			return result(args[0] != args[2])
		}
	}
	fmt.Fprintf(stderr, "test: cannot read %q\n", strings.Join(args, " "))
	return 2
}
