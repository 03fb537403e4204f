package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/dryrun"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// drainOptions are the flags of `cluster drain`, and what `cluster remove` drains with.
type drainOptions struct {
	timeout time.Duration
	// force evicts pods no controller owns.
	force bool
	// dryRun prints what the drain would do and changes nothing.
	dryRun bool
	// output is the format of a dry run's plan: "" (text), json or yaml (one document).
	output string
	// dropData evicts pods whose claims hold their data in the cluster.
	dropData bool
}

// Between two looks at the cluster being drained, and the longest a drain stays silent.
const (
	drainPoll       = 500 * time.Millisecond
	drainReportTick = 10 * time.Second
)

func newDrainCommand(g *GlobalOptions) *cobra.Command {
	var o drainOptions
	var dry dryrun.Mode
	cmd := &cobra.Command{
		Use:   "drain CLUSTER|CONTEXT",
		Short: "Move a secondary's elected pods to the other clusters, within their PodDisruptionBudgets",
		Long: `drain cordons the secondary's virtual node (as kubectl cordon: no new elected pod is placed
there) and evicts the elected pods on it through the primary's Eviction API, so their
PodDisruptionBudgets hold: an eviction a budget refuses is retried with backoff, and the progress
names the budget. Their controllers (Deployments, StatefulSets, Jobs...) re-create them and the
webhook places the new pods in the other clusters. drain returns once no pod is left on the
virtual node, which stays cordoned until ` + "`flotillactl cluster uncordon`" + `.

What drain guarantees:
  - pods no controller owns are refused (evicted, they would be gone for good), unless --force;
  - at-most-once pods (a StatefulSet's, pods with claims, pods annotated flotilla.dev/at-most-once)
    move one at a time: the next is evicted only once the previous one's proxy is gone from the
    primary, which Flotilla allows only once its delegate is proven stopped, so no identity ever
    runs twice;
  - pods whose claims of class flotilla hold their data in this cluster are refused (Flotilla does
    not move data, and a pod's cluster follows its data), unless the pod is annotated
    flotilla.dev/on-volume-cluster-loss=recreate: the virtual node is marked flotilla.dev/draining
    (until uncordon), and such a pod's replacement starts elsewhere on new, empty claims, the old
    claims and their data kept in this cluster;
  - refusals are decided before anything is changed: a drain that refuses does not even cordon.

It prints progress as it goes (pods left, moving, blocked per PodDisruptionBudget, an ETA from the
rate so far). It can be interrupted and run again at any time: it carries on from what the primary
shows. When it cannot finish within --timeout it exits non-zero and lists what is left, and why.

--dry-run prints what drain would do now and changes nothing; with -o json or -o yaml it prints
that plan as one document (kind DrainPlan: the pods to evict, refuse, wait for, hold and leave,
each with its namespace, name, controller and reason). A dry run that would refuse pods exits
non-zero, after printing. -o applies to --dry-run only.`,
		Example: `  # what would move, and what would be refused; changes nothing
  flotillactl cluster drain secondary1 --dry-run
  # the same plan as one JSON document (or -o yaml): the pods to evict, refuse, wait for, leave
  flotillactl cluster drain secondary1 --dry-run -o json | jq -r '.refused[] | .namespace + "/" + .name + ": " + .reason'
  # move everything, waiting up to 30 minutes for PodDisruptionBudgets
  flotillactl cluster drain secondary1 --timeout 30m
  # pods no controller owns too (they are not re-created anywhere)
  flotillactl cluster drain secondary1 --force
  # let new pods in again
  flotillactl cluster uncordon secondary1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dry == dryrun.Server {
				return dry.Refuse("drain", "plans from what it reads and would write nothing the API server could check")
			}
			if err := checkPlanOutput(o.output, dry); err != nil {
				return err
			}
			o.dryRun = dry.On()
			primary, _, name, err := resolveTarget(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			return newDrainer(primary, name, o, cmd.OutOrStdout()).run(cmd.Context())
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to keep evicting and waiting before giving up (and listing what is left)")
	cmd.Flags().BoolVar(&o.force, "force", false, "evict pods no controller owns too (they are not re-created anywhere)")
	dryrun.AddFlag(cmd.Flags(), &dry, "print what would be evicted and what refused; change nothing")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "with --dry-run: print the plan as one json or yaml document")
	return cmd
}

func newUncordonCommand(g *GlobalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "uncordon CLUSTER|CONTEXT",
		Short: "Let new elected pods be placed in a secondary again (after drain)",
		Long: `uncordon marks the secondary's virtual node schedulable again (as kubectl uncordon) and no longer
draining: the webhook places new elected pods there again. Pods that drain moved away stay where
they are now.`,
		Example: "  flotillactl cluster uncordon secondary1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			primary, _, name, err := resolveTarget(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			if err := setDraining(cmd.Context(), primary, name, false, time.Time{}); err != nil {
				return err
			}
			return setCordon(cmd.Context(), primary, name, false, cmd.OutOrStdout())
		},
	}
}

// setDraining marks (since at) or unmarks a cluster's virtual node as drained
// (flotilla.dev/draining): a pod that chose recreate leaves its data there for fresh claims.
func setDraining(ctx context.Context, primary client.Client, name string, on bool, at time.Time) error {
	nodeName := flotillav1.VirtualNodeName(name)
	var n corev1.Node
	if err := primary.Get(ctx, client.ObjectKey{Name: nodeName}, &n); err != nil {
		return fmt.Errorf("reading the virtual node %s of cluster %s: %w", nodeName, name, err)
	}
	_, has := n.Annotations[flotillav1.AnnotationDraining]
	if has == on {
		return nil
	}
	base := n.DeepCopy()
	if on {
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, flotillav1.AnnotationDraining, at.UTC().Format(time.RFC3339))
	} else {
		delete(n.Annotations, flotillav1.AnnotationDraining)
	}
	if err := primary.Patch(ctx, &n, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("marking %s draining=%t: %w", nodeName, on, err)
	}
	return nil
}

// setCordon cordons (or uncordons) a cluster's virtual node; doing it twice changes nothing.
func setCordon(ctx context.Context, primary client.Client, name string, on bool, out io.Writer) error {
	nodeName := flotillav1.VirtualNodeName(name)
	var n corev1.Node
	if err := primary.Get(ctx, client.ObjectKey{Name: nodeName}, &n); err != nil {
		return fmt.Errorf("reading the virtual node %s of cluster %s: %w", nodeName, name, err)
	}
	verb := map[bool]string{true: "cordoned", false: "uncordoned"}[on]
	if n.Spec.Unschedulable == on {
		_, err := fmt.Fprintf(out, "%s is already %s.\n", nodeName, verb)
		return err
	}
	base := n.DeepCopy()
	n.Spec.Unschedulable = on
	if err := primary.Patch(ctx, &n, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("setting spec.unschedulable=%t on %s: %w", on, nodeName, err)
	}
	_, err := fmt.Fprintf(out, "%s %s.\n", nodeName, verb)
	return err
}

// drainer drains one cluster: it gathers what the primary shows, asks planDrain, acts, and looks
// again. Everything it goes by is read anew each time, so it may be stopped and run again.
type drainer struct {
	primary client.Client
	clock   clock.Clock
	out     io.Writer
	cluster string
	o       drainOptions
	// poll is the time between looks; report the longest time without a progress line.
	poll, report time.Duration
}

func newDrainer(primary client.Client, cluster string, o drainOptions, out io.Writer) *drainer {
	return &drainer{primary: primary, clock: clock.RealClock{}, out: out, cluster: cluster, o: o, poll: drainPoll, report: drainReportTick}
}

// gather reads the proxies on the cluster's virtual node and, when some use claims, the claims
// of class flotilla whose data a cluster holds.
func (d *drainer) gather(ctx context.Context, moving map[types.UID]bool) (drainInput, error) {
	in := drainInput{cluster: d.cluster, moving: moving, force: d.o.force, dropData: d.o.dropData}
	proxies, err := boundProxies(ctx, d.primary, flotillav1.VirtualNodeName(d.cluster))
	if err != nil {
		return in, err
	}
	in.proxies = proxies
	for i := range proxies {
		if len(translate.Claims(&proxies[i].Spec)) == 0 {
			continue
		}
		var claims corev1.PersistentVolumeClaimList
		if err := d.primary.List(ctx, &claims); err != nil {
			return in, fmt.Errorf("listing claims: %w", err)
		}
		in.claimClusters = map[string]string{}
		for _, c := range claims.Items {
			if at := c.Annotations[flotillav1.AnnotationVolumeCluster]; at != "" {
				in.claimClusters[c.Namespace+"/"+c.Name] = at
			}
		}
		break
	}
	return in, nil
}

// look plans the drain from one look at the cluster, before the drain has evicted anything.
func (d *drainer) look(ctx context.Context) (drainPlan, error) {
	in, err := d.gather(ctx, nil)
	if err != nil {
		return drainPlan{}, fmt.Errorf("draining %s: %w", d.cluster, err)
	}
	return planDrain(in), nil
}

// refusedDrain is the error of a drain that refuses pods before it changes anything.
func refusedDrain(cluster string, plan drainPlan) error {
	return fmt.Errorf("refusing to drain %s, nothing changed: %d pod(s) cannot be moved:\n%s", cluster, len(plan.refused), drainLeft(drainPlan{refused: plan.refused}, nil))
}

// run drains the cluster: refusals first (nothing is changed then), the cordon, then evictions
// until no pod is left on the virtual node, the timeout, or an interruption.
func (d *drainer) run(ctx context.Context) error {
	nodeName := flotillav1.VirtualNodeName(d.cluster)
	plan, err := d.look(ctx)
	if err != nil {
		return err
	}
	if d.o.dryRun {
		return d.dryRun(plan)
	}
	if len(plan.refused) > 0 {
		return refusedDrain(d.cluster, plan)
	}
	if err := setCordon(ctx, d.primary, d.cluster, true, d.out); err != nil {
		return err
	}
	if err := setDraining(ctx, d.primary, d.cluster, true, d.clock.Now()); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d.o.timeout)
	defer cancel()
	st := drainState{start: d.clock.Now(), initial: plan.left(), moving: map[types.UID]bool{}, blocked: map[string]string{},
		refusals: map[types.UID]int{}, retryAt: map[types.UID]time.Time{}}
	for {
		in, err := d.gather(ctx, st.moving)
		if err != nil {
			if ctx.Err() != nil {
				return d.unfinished(ctx, plan, st.blocked)
			}
			return fmt.Errorf("draining %s: %w", d.cluster, err)
		}
		plan = planDrain(in)
		now := d.clock.Now()
		moved := d.progress(plan, &st, now)
		if plan.left() == 0 {
			_, err := fmt.Fprintf(d.out, "Drained %s: %d pod(s) moved in %s. %s stays cordoned; `flotillactl cluster uncordon %s` lets new pods in again.\n",
				d.cluster, moved, now.Sub(st.start).Round(time.Second), nodeName, d.cluster)
			return err
		}
		if plan.stuck() {
			return fmt.Errorf("drain of %s cannot finish: %d pod(s) left that it refuses to move:\n%s", d.cluster, len(plan.refused), drainLeft(plan, st.blocked))
		}
		if err := d.evictDue(ctx, plan, &st, now); err != nil {
			if ctx.Err() != nil {
				return d.unfinished(ctx, plan, st.blocked)
			}
			return fmt.Errorf("draining %s: %w", d.cluster, err)
		}
		select {
		case <-ctx.Done():
			return d.unfinished(ctx, plan, st.blocked)
		case <-d.clock.After(d.poll):
		}
	}
}

// drainState is what a drain remembers between its looks: only to pace and report, never to
// decide what is left (that is read anew each time).
type drainState struct {
	start    time.Time
	initial  int
	moving   map[types.UID]bool // at-most-once pods this drain evicted
	blocked  map[string]string  // pod key → what refused its last eviction
	refusals map[types.UID]int  // refusals in a row
	retryAt  map[types.UID]time.Time
	// lastLine and lastReport are the last progress printed (without its times) and when.
	lastLine   string
	lastReport time.Time
}

// progress prints a progress line when something changed or d.report passed; it returns how
// many pods have moved.
func (d *drainer) progress(plan drainPlan, st *drainState, now time.Time) int {
	moved := max(0, st.initial-plan.left())
	line := drainProgress(d.cluster, plan, st.blocked, moved, 0)
	if plan.left() > 0 && (line != st.lastLine || now.Sub(st.lastReport) >= d.report) {
		fmt.Fprintln(d.out, drainProgress(d.cluster, plan, st.blocked, moved, now.Sub(st.start)))
		st.lastLine, st.lastReport = line, now
	}
	return moved
}

// evictDue evicts the pods the plan says to evict whose backoff is over. Once a budget refuses
// one in a look, the others it blocked before wait for the next: a budget blocking a thousand
// pods costs a request per look, not a thousand.
func (d *drainer) evictDue(ctx context.Context, plan drainPlan, st *drainState, now time.Time) error {
	refusedNow := map[string]time.Time{} // what refused an eviction in this look → its retry
	for _, v := range plan.evict {
		if now.Before(st.retryAt[v.pod.UID]) {
			continue
		}
		if retry, ok := refusedNow[st.blocked[v.key()]]; ok {
			st.retryAt[v.pod.UID] = retry
			continue
		}
		by, err := d.evict(ctx, v.pod)
		switch {
		case err != nil:
			return err
		case by != "":
			st.blocked[v.key()] = by
			st.refusals[v.pod.UID]++
			st.retryAt[v.pod.UID] = now.Add(evictionBackoff(st.refusals[v.pod.UID]))
			refusedNow[by] = st.retryAt[v.pod.UID]
		default:
			delete(st.blocked, v.key())
			if v.atMostOnce {
				st.moving[v.pod.UID] = true
			}
			fmt.Fprintf(d.out, "Evicted %s.\n", v.key())
		}
	}
	return nil
}

// evict asks the primary's Eviction API to evict pod (only the incarnation seen: a UID
// precondition). It returns what refused it ("" when evicted or already gone); an error only
// when retrying cannot help.
func (d *drainer) evict(ctx context.Context, pod *corev1.Pod) (string, error) {
	return evictProxy(ctx, d.primary, pod)
}

// evictProxy evicts an elected pod through the primary's Eviction API (drain and rebalance), only
// the incarnation seen (a UID precondition). It returns what refused it ("" when evicted or
// already gone); an error only when retrying cannot help.
func evictProxy(ctx context.Context, primary client.Client, pod *corev1.Pod) (string, error) {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}}
	err := primary.SubResource("eviction").Create(ctx, pod, ev)
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return "", nil // evicted, gone, or another incarnation now
	case apierrors.IsTooManyRequests(err):
		return blockedBy(ctx, primary, pod, err), nil
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// Forbidden, but not for want of rights: the pod goes with its namespace, and is waited
		// for as any other.
		return fmt.Sprintf("its namespace %s being deleted (the pod goes with it)", pod.Namespace), nil
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), ctx.Err() != nil:
		return "", fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
	default:
		// e.g. a pod two budgets select (500): said, and retried, as kubectl drain does.
		return "an error: " + err.Error(), nil
	}
}

// blockedBy names what refused an eviction with 429: the PodDisruptionBudgets that select the
// pod, with the API server's own words on the one it went by.
func blockedBy(ctx context.Context, primary client.Client, pod *corev1.Pod, refused error) string {
	var pdbs policyv1.PodDisruptionBudgetList
	var names []string
	if err := primary.List(ctx, &pdbs, client.InNamespace(pod.Namespace)); err == nil {
		names = budgetsOf(pod, pdbs.Items)
	}
	detail := ""
	var status apierrors.APIStatus
	if errors.As(refused, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause {
				detail = " (" + c.Message + ")"
			}
		}
	}
	if len(names) == 0 {
		return "the API server (429: " + refused.Error() + ")"
	}
	return "PodDisruptionBudget " + strings.Join(names, ", ") + detail
}

// unfinished is the error of a drain stopped by its timeout or an interruption: what is left,
// and why.
func (d *drainer) unfinished(ctx context.Context, plan drainPlan, blocked map[string]string) error {
	what := fmt.Sprintf("did not finish within %s", d.o.timeout)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		what = "was interrupted"
	}
	return fmt.Errorf("drain of %s %s; %d pod(s) left on %s:\n%s\nIt is safe to run it again: it carries on from where it is: %w",
		d.cluster, what, plan.left(), flotillav1.VirtualNodeName(d.cluster), drainLeft(plan, blocked), context.Cause(ctx))
}

// dryRun prints what a drain would do now, as text or (--output) one document, and fails when it
// would refuse pods: after printing, so that the plan says which and why.
func (d *drainer) dryRun(plan drainPlan) error {
	if d.o.output != "" {
		if err := printDocument(d.out, d.o.output, drainDocumentOf(d.cluster, plan)); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(d.out, "Dry run: nothing is changed. Draining %s would:\n", d.cluster)
		printDrainSteps(d.out, "  ", d.cluster, plan)
	}
	return dryRunRefusal(d.cluster, plan)
}

// dryRunRefusal is the error of a dry run whose drain would refuse pods (nil when none).
func dryRunRefusal(cluster string, plan drainPlan) error {
	if len(plan.refused) == 0 {
		return nil
	}
	return fmt.Errorf("drain of %s would refuse %d pod(s) (and then change nothing)", cluster, len(plan.refused))
}

// printDrainSteps prints what a drain of cluster would do, one step a line, each line after indent.
func printDrainSteps(out io.Writer, indent, cluster string, plan drainPlan) {
	fmt.Fprintf(out, "%scordon %s\n", indent, flotillav1.VirtualNodeName(cluster))
	var once []string
	for _, v := range append(append([]podVerdict{}, plan.evict...), plan.held...) {
		if v.atMostOnce && !translate.Terminal(v.pod) {
			once = append(once, v.key())
			continue
		}
		fmt.Fprintf(out, "%sevict %s%s\n", indent, v.key(), ownerSuffix(v.pod))
	}
	if len(once) > 0 {
		fmt.Fprintf(out, "%sevict one at a time, each once the previous one's delegate is gone (at-most-once): %s\n", indent, strings.Join(once, ", "))
	}
	for _, v := range plan.moving {
		fmt.Fprintf(out, "%swait for %s (already evicted)\n", indent, v.key())
	}
	for _, v := range plan.ignored {
		fmt.Fprintf(out, "%sleave %s: %s\n", indent, v.key(), v.why)
	}
	for _, v := range plan.refused {
		fmt.Fprintf(out, "%srefuse %s: %s\n", indent, v.key(), v.why)
	}
}

// drainDocument is a drain's plan as --output prints it: every proxy on the virtual node under
// what the drain would do with it now. evict is in the order of eviction; held are at-most-once
// pods that wait for the one before them.
type drainDocument struct {
	Kind        string       `json:"kind"`
	Cluster     string       `json:"cluster"`
	VirtualNode string       `json:"virtualNode"`
	Evict       []plannedPod `json:"evict"`
	Held        []plannedPod `json:"held"`
	Moving      []plannedPod `json:"moving"`
	Ignored     []plannedPod `json:"ignored"`
	Refused     []plannedPod `json:"refused"`
}

// plannedPod is one proxy in a drain's plan.
type plannedPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Controller is its controller as Kind/name, "" when none owns it.
	Controller string `json:"controller"`
	// AtMostOnce pods move one at a time, each once the one before is proven stopped.
	AtMostOnce bool `json:"atMostOnce"`
	// Reason says why the pod is where it is in the plan ("" for a plain eviction).
	Reason string `json:"reason"`
}

// drainDocumentOf is plan as a document.
func drainDocumentOf(cluster string, plan drainPlan) drainDocument {
	pods := func(vs []podVerdict) []plannedPod {
		out := make([]plannedPod, 0, len(vs))
		for _, v := range vs {
			p := plannedPod{Namespace: v.pod.Namespace, Name: v.pod.Name, AtMostOnce: v.atMostOnce, Reason: v.why}
			if ref := metav1.GetControllerOf(v.pod); ref != nil {
				p.Controller = ref.Kind + "/" + ref.Name
			}
			out = append(out, p)
		}
		return out
	}
	return drainDocument{Kind: "DrainPlan", Cluster: cluster, VirtualNode: flotillav1.VirtualNodeName(cluster),
		Evict: pods(plan.evict), Held: pods(plan.held), Moving: pods(plan.moving), Ignored: pods(plan.ignored), Refused: pods(plan.refused)}
}

// ownerSuffix is " (Kind name)" of the pod's controller, or " (no controller)".
func ownerSuffix(pod *corev1.Pod) string {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return " (" + ref.Kind + " " + ref.Name + ")"
	}
	return " (no controller)"
}
