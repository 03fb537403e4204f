package dryrun

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Mode is a --dry-run value.
type Mode string

// The modes, as kubectl names them: None changes things; Client prints what would be done and
// sends nothing that writes; Server also has the API server check each write, persisting none.
const (
	None   Mode = "none"
	Client Mode = "client"
	Server Mode = "server"
)

// String is the mode's name.
func (m *Mode) String() string {
	if *m == "" {
		return string(None)
	}
	return string(*m)
}

// Set takes none, client or server; true and false, the flag's spellings when it was a bool, are
// client and none.
func (m *Mode) Set(v string) error {
	switch v {
	case "none", "false":
		*m = None
	case "client", "true":
		*m = Client
	case "server":
		*m = Server
	default:
		return fmt.Errorf("want none, client or server (got %q)", v)
	}
	return nil
}

// Type names the values in --help.
func (m *Mode) Type() string { return "none|client|server" }

// On says whether anything is only to be shown, not done.
func (m Mode) On() bool { return m == Client || m == Server }

// AddFlag registers --dry-run on fs into m, with usage; --dry-run alone is client.
func AddFlag(fs *pflag.FlagSet, m *Mode, usage string) {
	*m = None
	fs.Var(m, "dry-run", usage+` (none, client: print what would be done, or server: as client, and the API server checks each write; --dry-run alone is client)`)
	fs.Lookup("dry-run").NoOptDefVal = string(Client)
}

// Refuse is the error of a command that cannot take mode m, saying why and what to use.
func (m Mode) Refuse(command, why string) error {
	return fmt.Errorf("--dry-run=%s: %s %s; use --dry-run=client", m, command, why)
}
