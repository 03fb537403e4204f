// Package version holds the build's version, stamped at link time by the Makefile
// (-X github.com/flotilla-dev/flotilla/pkg/version.version=...), for `--version` and User-Agents.
package version
