package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flotilla-dev/flotilla/internal/dryrun"
	clusterviews "github.com/flotilla-dev/flotilla/pkg/clusters/views"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// rebalanceOptions are `rebalance`'s flags.
type rebalanceOptions struct {
	namespace, selector string
	dryRun              bool
	// output is the format of a dry run's plan: "" (a table), json or yaml (one document).
	output        string
	timeout, poll time.Duration
}

func newRebalanceCommand(g *GlobalOptions) *cobra.Command {
	o := rebalanceOptions{poll: 2 * time.Second}
	var dry dryrun.Mode
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Move elected pods until each controller's split over the clusters is what placement would choose now",
		Long: `rebalance evicts elected pods, through the primary's Eviction API (PodDisruptionBudgets hold),
until each controller's (ReplicaSet's, StatefulSet's, Job's) pods are split over the clusters as
placement would split them now: evenly over the clusters they fit, or by their
flotilla.dev/cluster-weights. Their controllers re-create them and the webhook places them.

One pod of a controller moves at a time: the next once the last one's replacement is Ready.
The plan is placement's own judgement, the one the manager's --rebalance-on-return makes, over
the clusters as their virtual nodes show them (Ready, cordoned, tainted, draining, the pods'
flotilla.dev/clusters, selector and weights); where a replacement goes is the webhook's judgement,
which also sees each secondary's nodes. Pods whose claims hold data stay where it is.
It is safe to interrupt and run again. With --dry-run it prints the plan and changes nothing;
with -o json or -o yaml as well, the plan is one document (kind RebalancePlan: per controller its
pods per cluster now and as placement would have them, the moves, each pod with its cluster from
and to, and the pods that stay with their data). -o applies to --dry-run only.`,
		Example: `  # What would move, everywhere
  flotillactl rebalance --dry-run
  # The same plan as one JSON document (or -o yaml)
  flotillactl rebalance --dry-run -o json | jq -r '.controllers[].moves[] | .namespace + "/" + .name + " " + .from + "->" + .to'
  # Rebalance one namespace's web pods
  flotillactl rebalance -n shop -l app=web --timeout 5m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dry == dryrun.Server {
				return dry.Refuse("rebalance", "plans its moves from what it reads and would write nothing the API server could check")
			}
			if err := checkPlanOutput(o.output, dry); err != nil {
				return err
			}
			o.dryRun = dry.On()
			primary, err := g.primaryClient()
			if err != nil {
				return err
			}
			return runRebalance(cmd.Context(), primary, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "only this namespace's elected pods (default: every namespace)")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "only elected pods with these labels (a label selector, as kubectl's -l)")
	dryrun.AddFlag(cmd.Flags(), &dry, "print the moves and change nothing")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "with --dry-run: print the plan as one json or yaml document")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long, saying what is left")
	return cmd
}

// controllerPlan is one controller's part of a rebalance.
type controllerPlan struct {
	name  string // namespace/controller
	uid   types.UID
	split placement.Split
}

// runRebalance plans, and unless dry-run moves, round after round until nothing is left to move.
func runRebalance(ctx context.Context, primary client.Client, o rebalanceOptions, out io.Writer) error {
	sel, err := labels.Parse(o.selector)
	if err != nil {
		return fmt.Errorf("--selector: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	moved := 0
	for {
		plans, busy, err := planRebalance(ctx, primary, o.namespace, sel)
		if err != nil {
			return err
		}
		left := 0
		for _, p := range plans {
			left += len(p.split.Moves)
		}
		if o.dryRun && o.output != "" {
			return printDocument(out, o.output, rebalanceDocumentOf(o, plans, busy))
		}
		if o.dryRun {
			return printPlans(out, plans, busy)
		}
		if left == 0 && len(busy) == 0 {
			_, err := fmt.Fprintf(out, "Balanced: %d pod(s) moved in %s.\n", moved, time.Since(start).Round(time.Second))
			return err
		}
		var blocked []string
		for _, p := range plans {
			if len(p.split.Moves) == 0 {
				continue
			}
			m := p.split.Moves[0]
			refused, err := evictProxy(ctx, primary, m.Pod)
			switch {
			case err != nil:
				return err
			case refused != "":
				blocked = append(blocked, fmt.Sprintf("%s/%s: refused by %s", m.Pod.Namespace, m.Pod.Name, refused))
			default:
				moved++
				left--
				fmt.Fprintf(out, "Evicted %s/%s of %s: from %s, its replacement expected in %s.\n", m.Pod.Namespace, m.Pod.Name, p.name, m.From, m.To)
			}
		}
		eta := ""
		if moved > 0 && left > 0 {
			eta = fmt.Sprintf(", about %s left", (time.Since(start) / time.Duration(moved) * time.Duration(left)).Round(time.Second))
		}
		fmt.Fprintf(out, "%d move(s) left, %d controller(s) with a pod on its way%s.\n", left, len(busy), eta)
		for _, b := range blocked {
			fmt.Fprintf(out, "  not evicted this round: %s\n", b)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rebalance not done after %s: %d move(s) left, %d controller(s) with a pod not Ready: %w", o.timeout, left, len(busy), ctx.Err())
		case <-time.After(o.poll):
		}
	}
}

// planRebalance gathers the elected pods, the virtual nodes and the ClusterDetectors, and plans
// each controller's moves; busy are the controllers with a pod not judged now (moving, starting).
func planRebalance(ctx context.Context, primary client.Client, namespace string, sel labels.Selector) ([]controllerPlan, []string, error) {
	var pods corev1.PodList
	if err := primary.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{flotillav1.LabelProxy: "true"}); err != nil {
		return nil, nil, fmt.Errorf("listing elected pods: %w", err)
	}
	var chosen []corev1.Pod
	for _, p := range pods.Items {
		if sel.Matches(labels.Set(p.Labels)) {
			chosen = append(chosen, p)
		}
	}
	views, err := virtualNodeViews(ctx, primary, time.Now())
	if err != nil {
		return nil, nil, err
	}
	groups, busyUIDs := placement.Groups(chosen)
	var plans []controllerPlan
	for uid, group := range groups {
		// The manager's rebalancer plans with the same judgement (placement.Rebalance), over the
		// clusters the namespace's ClusterSets hold.
		tenancy, err := (&clusterviews.Gatherer{Tenancy: primary}).TenancyOf(ctx, group[0].Namespace)
		if err != nil {
			return nil, nil, err
		}
		split, err := placement.Rebalance(ctx, group, tenancy.Deny(views))
		if err != nil {
			return nil, nil, fmt.Errorf("planning %s: %w", controllerName(group[0]), err)
		}
		plans = append(plans, controllerPlan{name: controllerName(group[0]), uid: uid, split: split})
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].name < plans[j].name })
	var busy []string
	for i := range chosen {
		if ref := metav1.GetControllerOf(&chosen[i]); ref != nil && busyUIDs[ref.UID] {
			busy = append(busy, controllerName(&chosen[i]))
		}
	}
	sort.Strings(busy)
	return plans, slices.Compact(busy), nil
}

func controllerName(p *corev1.Pod) string {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return p.Namespace + "/" + p.Name
	}
	return fmt.Sprintf("%s/%s %s", p.Namespace, strings.ToLower(ref.Kind), ref.Name)
}

// virtualNodeViews is the clusters as their virtual nodes and ClusterDetectors show them, for
// placement to judge: no node detail (NodesUnknown), so the pods' constraints on the secondaries'
// nodes and their room are the secondaries' to judge.
func virtualNodeViews(ctx context.Context, primary client.Client, now time.Time) ([]placement.ClusterView, error) {
	var nodes corev1.NodeList
	if err := primary.List(ctx, &nodes, client.HasLabels{flotillav1.LabelCluster}); err != nil {
		return nil, fmt.Errorf("listing virtual nodes: %w", err)
	}
	var detectors flotillav1.ClusterDetectorList
	if err := primary.List(ctx, &detectors); err != nil {
		return nil, fmt.Errorf("listing ClusterDetectors: %w", err)
	}
	noClaims := map[string]bool{}
	for _, d := range detectors.Items {
		noClaims[d.Name] = d.Status.StorageClass == clusters.StorageClassNone
	}
	views := make([]placement.ClusterView, 0, len(nodes.Items))
	for i := range nodes.Items {
		n := &nodes.Items[i]
		cluster := n.Labels[flotillav1.LabelCluster]
		v := placement.ClusterView{Name: cluster, Labels: n.Labels, Ready: placement.NodeReady(n), Reason: "its virtual node is not Ready",
			NoClaims: noClaims[cluster], NodesUnknown: true}
		placement.WithVirtualNode(&v, n, now)
		views = append(views, v)
	}
	return views, nil
}

// printPlans prints a dry run's plan.
func printPlans(out io.Writer, plans []controllerPlan, busy []string) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTROLLER\tNOW\tPLACEMENT\tMOVES\tSTAYS (DATA)")
	total := 0
	for _, p := range plans {
		var moves []string
		for _, m := range p.split.Moves {
			moves = append(moves, fmt.Sprintf("%s %s->%s", m.Pod.Name, m.From, m.To))
		}
		total += len(moves)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.name, counts(p.split.Have), counts(p.split.Want), orNone(moves), orNone(p.split.Pinned))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range busy {
		fmt.Fprintf(out, "%s has a pod not Ready or on its way: judged once it is.\n", b)
	}
	_, err := fmt.Fprintf(out, "%d move(s) planned (dry run: nothing evicted).\n", total)
	return err
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return orNone(parts)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// rebalanceDocument is a rebalance's plan as --output prints it.
type rebalanceDocument struct {
	Kind string `json:"kind"`
	// Namespace and Selector are what the plan covers ("": every namespace, every pod).
	Namespace   string               `json:"namespace"`
	Selector    string               `json:"selector"`
	Controllers []controllerDocument `json:"controllers"`
	// Busy are the controllers with a pod not Ready or on its way: judged once it is.
	Busy []string `json:"busy"`
}

// controllerDocument is one controller's part of a rebalance's plan.
type controllerDocument struct {
	// Controller is namespace/kind name, as the table's CONTROLLER.
	Controller string `json:"controller"`
	// Now and Placement count its pods per cluster: where they are, and where placement would
	// have them.
	Now       map[string]int `json:"now"`
	Placement map[string]int `json:"placement"`
	// Moves are the evictions, in order: each pod leaves From and its replacement is expected in To.
	Moves []plannedMove `json:"moves"`
	// StaysForData are the pods that stay where their claims' data is.
	StaysForData []string `json:"staysForData"`
}

// plannedMove is one pod a rebalance would evict.
type plannedMove struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// rebalanceDocumentOf is a dry run's plans as a document.
func rebalanceDocumentOf(o rebalanceOptions, plans []controllerPlan, busy []string) rebalanceDocument {
	doc := rebalanceDocument{Kind: "RebalancePlan", Namespace: o.namespace, Selector: o.selector,
		Controllers: make([]controllerDocument, 0, len(plans)), Busy: emptyIfNil(busy)}
	for _, p := range plans {
		c := controllerDocument{Controller: p.name, Now: nonNilCounts(p.split.Have), Placement: nonNilCounts(p.split.Want),
			Moves: make([]plannedMove, 0, len(p.split.Moves)), StaysForData: emptyIfNil(p.split.Pinned)}
		for _, m := range p.split.Moves {
			c.Moves = append(c.Moves, plannedMove{Namespace: m.Pod.Namespace, Name: m.Pod.Name, From: m.From, To: m.To})
		}
		doc.Controllers = append(doc.Controllers, c)
	}
	return doc
}

// nonNilCounts is m, or an empty map when m is nil: documents print {} there, never null.
func nonNilCounts(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}
