package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/pkg/version"
)

// GlobalOptions are the flags every command shares.
type GlobalOptions struct {
	// Kubeconfig is the path of the user's kubeconfig (default: kubectl's rules).
	Kubeconfig string
	// Context is the context of the primary cluster (--context, as kubectl's; default: the
	// current context). PrimaryContext is its older spelling (--primary-context), which wins.
	Context, PrimaryContext string
}

// primaryContext is the primary's context: --primary-context, else --context ("": the current one).
func (g *GlobalOptions) primaryContext() string {
	if g.PrimaryContext != "" {
		return g.PrimaryContext
	}
	return g.Context
}

// secondaryContextName resolves the secondary's context of join, add and remove:
// --secondary-context; else, for one release, --context as those commands read it before, with a
// warning on errOut, where it cannot be the primary's: in join and add (which need a secondary)
// always, in remove (whose secondary defaults to the registered context) only beside the older
// --primary-context. The primary is then --primary-context or the current context.
func (g *GlobalOptions) secondaryContextName(secondary string, required bool, errOut io.Writer) string {
	if secondary != "" || g.Context == "" || (!required && g.PrimaryContext == "") {
		return secondary
	}
	fmt.Fprintf(errOut, "Warning: --context %s names the secondary here as it did before; use --secondary-context %s (from the next release --context names the primary, as everywhere else)\n", g.Context, g.Context)
	secondary, g.Context = g.Context, ""
	return secondary
}

// NewRootCommand builds flotillactl's command tree, writing to out and errOut.
func NewRootCommand(out, errOut io.Writer) *cobra.Command {
	var g GlobalOptions
	root := &cobra.Command{
		Use:   "flotillactl",
		Short: "Run one Kubernetes cluster's workloads on many",
		Long: `flotillactl manages Flotilla, which makes many Kubernetes clusters work as one.

Each secondary cluster appears in the primary as a virtual node; pods annotated
flotilla.dev/elect run in a secondary while the primary shows them as normal pods; a
Replicator copies a namespace's resources to chosen clusters.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// kubectl runs this binary as the plugin kubectl-flotilla (make plugin): usage then names
	// the command the user typed.
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl flotilla"}
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.PersistentFlags().StringVar(&g.Kubeconfig, "kubeconfig", "", "path of the kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	root.PersistentFlags().StringVar(&g.Context, "context", "", "kubeconfig context of the primary cluster (default: the current context)")
	root.PersistentFlags().StringVar(&g.PrimaryContext, "primary-context", "", "kubeconfig context of the primary cluster")
	_ = root.PersistentFlags().MarkDeprecated("primary-context", "use --context, as kubectl does")
	root.AddCommand(newVersionCommand(), newClusterCommand(&g), newDoctorCommand(doctorDeps{primary: g.primaryClient, contexts: g.userContexts}),
		newUninstallCommand(&g), newRebalanceCommand(&g), newReplicateCommand(g.primaryClient), newTraceCommand(g.primaryClient), newRenderCommand(g.primaryClient))
	registerCompletions(root, &g)
	return root
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print flotillactl's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			switch output {
			case "":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "flotillactl", info)
				return err
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			default:
				return fmt.Errorf("--output %q: want json or nothing", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	return cmd
}
