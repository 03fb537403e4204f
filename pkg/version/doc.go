// Package version owns the build's identity (version, commit, Go version, platform), stamped at
// link time by the Makefile (-X github.com/flotilla-dev/flotilla/pkg/version.version=...), so that
// `--version`, the manager's logs and its User-Agent name the build one way. It imports nothing of
// this module, so any layer may use it.
package version
