package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// runScript runs a script of simple commands separated by ";", "&&" or "||", left to right as a
// POSIX shell does for such a list. Words are split on blanks; single and double quotes group
// words (no expansions but $VAR and ${VAR} outside single quotes); a word starting with # begins
// a comment; "> FILE" and ">> FILE" send a command's standard output to a file.
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
		cmd, err := splitWords(part.text)
		if err != nil {
			fmt.Fprintln(stderr, "sh:", err)
			return 2
		}
		words := cmd.words
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
		code = runCommand(cmd, stdout, stderr)
	}
	return code
}

// runFile runs the script in a file, as `sh FILE` does (its arguments are not read).
func runFile(path string, stdout, stderr io.Writer) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "sh:", err)
		return 127
	}
	return runScript(string(raw), stdout, stderr)
}

// runCommand runs one simple command, its standard output in the file it is redirected to.
func runCommand(cmd command, stdout, stderr io.Writer) int {
	if cmd.out == "" {
		return applet(cmd.words[0], cmd.words[1:], stdout, stderr)
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if cmd.append {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(cmd.out, flags, 0o666)
	if err != nil {
		fmt.Fprintln(stderr, "sh:", err)
		return 1
	}
	code := applet(cmd.words[0], cmd.words[1:], f, stderr)
	if err := f.Close(); err != nil {
		fmt.Fprintln(stderr, "sh:", err)
		return 1
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
		case c == '#' && (cur.Len() == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			// A comment (a script file's #! line too) runs to the end of its line.
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
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

// command is a simple command: its words, and the file its standard output goes to ("" for the
// shell's own), appended to with ">>".
type command struct {
	words  []string
	out    string
	append bool
}

// splitWords splits a command into words, honouring quotes and expanding $VAR outside single
// quotes; an unquoted > or >> takes the next word as the file for standard output.
func splitWords(s string) (command, error) {
	var cmd command
	var cur strings.Builder
	inWord := false
	quote := byte(0)
	redirect := "" // ">" or ">>", waiting for its file
	endWord := func() {
		if redirect != "" {
			cmd.out, cmd.append, redirect = cur.String(), redirect == ">>", ""
		} else {
			cmd.words = append(cmd.words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == '\'':
			cur.WriteByte(c)
		case c == '$':
			i += expandVar(s[i+1:], &cur)
			inWord = true
		case quote == '"':
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				endWord()
			}
		case c == '>':
			if inWord {
				endWord()
			}
			if redirect != "" {
				return command{}, errors.New("syntax error near >")
			}
			redirect = ">"
			if strings.HasPrefix(s[i+1:], ">") {
				redirect = ">>"
				i++
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return command{}, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		endWord()
	}
	if redirect != "" {
		return command{}, fmt.Errorf("no file after %s", redirect)
	}
	return cmd, nil
}

// expandVar writes the value of the variable named after a $ (s follows the $), or the $ itself
// when no name follows, and returns how many bytes of s it read.
func expandVar(s string, cur *strings.Builder) int {
	name, n := varName(s)
	if n == 0 {
		cur.WriteByte('$')
		return 0
	}
	cur.WriteString(os.Getenv(name))
	return n
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
		"mkdir":    mkdir,
		"rm":       rm,
		"chmod":    chmod,
		"nslookup": nslookup,
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
		// Not an empty select: with no other goroutine, the runtime calls that a deadlock and
		// exits 2 (seen in a container; a pod running `sleep infinity` crash-looped).
		for {
			time.Sleep(time.Hour)
		}
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

// parseMode reads an octal permission mode (0777, 755); the bits above 0777 are refused, as no
// script of the bed sets them.
func parseMode(s string) (os.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("invalid mode %q (octal, at most 0777)", s)
	}
	return os.FileMode(m), nil
}

// mkdir makes each directory: -p makes missing parents too and accepts a directory that exists;
// -m MODE gives a directory it makes exactly that mode, whatever the umask, as coreutils' does.
func mkdir(args []string, _, stderr io.Writer) int {
	parents, mode, setMode := false, os.FileMode(0o777), false
	var paths []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p":
			parents = true
		case a == "-m" && i+1 < len(args):
			m, err := parseMode(args[i+1])
			if err != nil {
				fmt.Fprintln(stderr, "mkdir:", err)
				return 2
			}
			mode, setMode = m, true
			i++
		case len(a) > 1 && a[0] == '-':
			fmt.Fprintf(stderr, "mkdir: unknown option %s (only -p and -m MODE)\n", a)
			return 2
		default:
			paths = append(paths, a)
		}
	}
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "mkdir: want a directory")
		return 2
	}
	code := 0
	for _, p := range paths {
		if info, err := os.Stat(p); parents && err == nil && info.IsDir() {
			continue
		}
		var err error
		if parents {
			err = os.MkdirAll(p, 0o777)
		} else {
			err = os.Mkdir(p, 0o777)
		}
		if err == nil && setMode {
			err = os.Chmod(p, mode)
		}
		if err != nil {
			fmt.Fprintln(stderr, "mkdir:", err)
			code = 1
		}
	}
	return code
}

// rm removes each file: -r also directories and all they hold, -f keeps quiet about (and does
// not fail on) a file that does not exist. It refuses "" and /, as a guard against a script whose
// variable is empty.
func rm(args []string, _, stderr io.Writer) int {
	recursive, force, paths, err := rmArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, "rm:", err)
		return 2
	}
	if len(paths) == 0 && !force {
		fmt.Fprintln(stderr, "rm: want a file")
		return 2
	}
	code := 0
	for _, p := range paths {
		if p == "" || filepath.Clean(p) == "/" {
			fmt.Fprintf(stderr, "rm: refusing to remove %q\n", p)
			code = 1
			continue
		}
		info, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && force:
			continue
		case err != nil:
			fmt.Fprintln(stderr, "rm:", err)
			code = 1
			continue
		case info.IsDir() && !recursive:
			fmt.Fprintf(stderr, "rm: %s: is a directory\n", p)
			code = 1
			continue
		}
		if recursive {
			err = os.RemoveAll(p)
		} else {
			err = os.Remove(p)
		}
		if err != nil {
			fmt.Fprintln(stderr, "rm:", err)
			code = 1
		}
	}
	return code
}

// rmArgs reads rm's options (-r, -R, -f, combined as in -rf, up to the first path or --) and paths.
func rmArgs(args []string) (recursive, force bool, paths []string, err error) {
	for i, a := range args {
		if a == "--" {
			return recursive, force, append(paths, args[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' || len(paths) > 0 {
			paths = append(paths, a)
			continue
		}
		for _, f := range a[1:] {
			switch f {
			case 'r', 'R':
				recursive = true
			case 'f':
				force = true
			default:
				return false, false, nil, fmt.Errorf("unknown option -%c (only -r and -f)", f)
			}
		}
	}
	return recursive, force, paths, nil
}

// chmod MODE PATH... sets each path's permission bits to the octal MODE.
func chmod(args []string, _, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprintln(stderr, "chmod: want MODE PATH...")
		return 2
	}
	mode, err := parseMode(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "chmod:", err)
		return 2
	}
	code := 0
	for _, p := range args[1:] {
		if err := os.Chmod(p, mode); err != nil {
			fmt.Fprintln(stderr, "chmod:", err)
			code = 1
		}
	}
	return code
}
