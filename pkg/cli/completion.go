package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// completionTimeout bounds what a shell's completion may wait for the primary.
const completionTimeout = 5 * time.Second

// completeContexts completes a context of the user's kubeconfig (--context, --secondary-context).
func (g *GlobalOptions) completeContexts(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	user, err := g.userConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var names []string
	for name := range user.Contexts {
		if strings.HasPrefix(name, toComplete) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeClusters completes the one argument of a command that names a registered cluster: the
// cluster names of the primary's registration.
func (g *GlobalOptions) completeClusters(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	primary, err := g.primaryClient()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	reg, err := clusters.ReadRegistration(ctx, primary)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var names []string
	for contextName := range reg.Contexts {
		if name := clusters.ClusterName(contextName); strings.HasPrefix(name, toComplete) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), cobra.ShellCompDirectiveNoFileComp
}

// registerCompletions wires the dynamic completions into the tree: contexts for --context and
// --secondary-context wherever they are, registered clusters for each command whose argument is
// one (its Use says CLUSTER|CONTEXT or OLD).
func registerCompletions(root *cobra.Command, g *GlobalOptions) {
	_ = root.RegisterFlagCompletionFunc("context", g.completeContexts)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("secondary-context") != nil {
			_ = c.RegisterFlagCompletionFunc("secondary-context", g.completeContexts)
		}
		if c.ValidArgsFunction == nil && (strings.Contains(c.Use, " CLUSTER|CONTEXT") || strings.HasPrefix(c.Use, "replace OLD")) {
			c.ValidArgsFunction = g.completeClusters
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
