// Package dryrun owns the one shape of --dry-run that flotillactl's commands and the manager's
// uninstall take, as kubectl's: none, client or server.
package dryrun
