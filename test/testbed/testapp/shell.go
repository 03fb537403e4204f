package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
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

// applet runs one of the simple commands and returns its exit code.
func applet(name string, args []string, stdout, stderr io.Writer) int {
	switch name {
	case "echo":
		newline := true
		if len(args) > 0 && args[0] == "-n" {
			newline, args = false, args[1:]
		}
		fmt.Fprint(stdout, strings.Join(args, " "))
		if newline {
			fmt.Fprintln(stdout)
		}
		return 0
	case "sleep":
		return sleep(args, stderr)
	case "true":
		return 0
	case "false":
		return 1
	case "exit":
		code := 0
		if len(args) > 0 {
			code, _ = strconv.Atoi(args[0])
		}
		return code
	case "hostname":
		h, err := os.Hostname()
		if err != nil {
			fmt.Fprintln(stderr, "hostname:", err)
			return 1
		}
		fmt.Fprintln(stdout, h)
		return 0
	case "env":
		for _, kv := range os.Environ() {
			fmt.Fprintln(stdout, kv)
		}
		return 0
	case "printenv":
		return printenv(args, stdout)
	case "cat":
		return cat(args, stdout, stderr)
	case "wget":
		return wget(args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "%s: not found\n", name)
	return 127
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
	client := &http.Client{Timeout: 10 * time.Second}
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
	code := 0
	for _, p := range args {
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
