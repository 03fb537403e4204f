// Command testapp is the test bed's application image: what the specs run on real nodes where a
// user would run their own service. The bed cannot pull images, so this one static program is
// built into the image TestAppImage and answers to several names, as busybox does:
//
//	testapp [serve]   an HTTP server (see serve)
//	sh -c SCRIPT      a small shell: commands separated by ";", "&&" or "||" (see runScript)
//	sh FILE           the same shell running a script file (the bed's volume helper pods)
//	sh                the same shell reading its lines from standard input (kubectl exec -it)
//	echo, sleep, true, false, cat, hostname, env, printenv, exit, tty, ls, test, [, wget -qO- URL
//	mkdir [-p] [-m MODE], rm [-r] [-f], chmod MODE
//	spin PERCENT      keeps one CPU busy PERCENT of the time (real usage for kubectl top and HPAs)
//	nslookup [-type=A|AAAA|SRV] NAME   asks the cluster DNS of the pod's resolv.conf (see nslookup)
//
// The specs of other projects' suites write `sh -c "echo ..."` or `sleep 3600`: they run as they
// were written.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "testapp" {
		if len(args) == 0 {
			args = []string{"serve"}
		}
		name, args = args[0], args[1:]
	}
	os.Exit(run(context.Background(), name, args))
}

// run runs one applet and returns its exit code.
func run(ctx context.Context, name string, args []string) int {
	switch name {
	case "serve":
		return serve(ctx, os.Stdout, args)
	case "sh":
		if len(args) >= 2 && args[0] == "-c" {
			return runScript(args[1], os.Stdout, os.Stderr)
		}
		if len(args) == 0 {
			return interactive(os.Stdin, os.Stdout, os.Stderr, isTerminal(os.Stdin))
		}
		if !strings.HasPrefix(args[0], "-") {
			return runFile(args[0], os.Stdout, os.Stderr)
		}
		fmt.Fprintln(os.Stderr, "sh: only `sh -c SCRIPT`, `sh FILE` and `sh` reading its standard input are supported")
		return 2
	default:
		return applet(name, args, os.Stdout, os.Stderr)
	}
}
