// Command flotillactl is Flotilla's CLI (also usable as the kubectl plugin kubectl-flotilla).
package main

import (
	"fmt"
	"os"

	"github.com/flotilla-dev/flotilla/pkg/cli"
)

func main() {
	if err := cli.NewRootCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
