package cli

import (
	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/pkg/uninstall"
)

func newUninstallCommand(g *GlobalOptions) *cobra.Command {
	var o uninstall.Options
	cmd := &cobra.Command{
		Use:   "uninstall [--orphan] [--dry-run]",
		Short: "Remove what Flotilla's manager created in the primary (what helm uninstall's hook runs)",
		Long: `uninstall stops the manager (scales its Deployment to zero and waits until no manager holds
its Lease), then removes what it created at run time in the primary: the webhook configuration
(first, so no pod creation fails on it), the virtual nodes, the ClusterDetectors, its Secrets
(webhook CA, registration) and its Lease. The chart's pre-delete hook runs the same steps, so
helm uninstall does this by itself; run it by hand for a manager installed another way.

It refuses, changing nothing, while elected pods or Replicators exist: delete them first (or
remove flotilla.dev/elect from their pod templates). --orphan lets them go instead: Flotilla's
finalizers are removed and their delegates and copies keep running in the secondaries, unmanaged.
What join installed in each secondary stays: run 'flotillactl cluster remove' for each first.

--dry-run names each object it would stop, release or delete, as the primary holds them now, and
changes nothing; it fails as the uninstall would when it would refuse. With -o json or -o yaml that
plan is one document (kind UninstallPlan). The names come from the manager's Deployment (the
chart's fullnameOverride), or --name-prefix.`,
		Example: "  flotillactl uninstall --dry-run\n  flotillactl uninstall --dry-run -o json | jq -r '.virtualNodes[]'\n  flotillactl uninstall",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.primaryClient()
			if err != nil {
				return err
			}
			o.Out = cmd.OutOrStdout()
			return uninstall.Run(cmd.Context(), c, o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
