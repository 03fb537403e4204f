package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/dryrun"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// The steps of a replacement, in order; each is recorded on the old cluster's ClusterDetector
// before it begins, so that an interrupted replacement resumes at it.
const (
	stepChecking    = "Checking"
	stepReplicating = "Replicating"
	stepDraining    = "Draining"
	stepDetaching   = "Detaching"
	stepRemoving    = "Removing"
)

var replaceSteps = []string{stepChecking, stepReplicating, stepDraining, stepDetaching, stepRemoving}

// replaceOptions are `cluster replace`'s flags.
type replaceOptions struct {
	with    string
	timeout time.Duration
	dryRun  bool
	// output is the format of a dry run's plan: "" (text), json or yaml (one document).
	output string
	poll   time.Duration
}

func newReplaceCommand(g *GlobalOptions) *cobra.Command {
	o := replaceOptions{poll: 2 * time.Second}
	var dry dryrun.Mode
	cmd := &cobra.Command{
		Use:   "replace OLD --with NEW",
		Short: "Replace a secondary by another (an out-of-place upgrade): replicate, drain, retire",
		Long: `replace moves everything of a secondary to another one that is already joined, then retires it,
in five steps, each shown as it runs and recorded on the old cluster's ClusterDetector (the
condition Replacement, whose reason is the step), so that an interrupted replacement resumes
where it was when run again:

  Checking     NEW is joined, Running and Ready, and is not OLD.
  Replicating  NEW is added to every Replicator that targets OLD; replace waits until each is
               healthy in NEW (everything applied, its Deployment's replicas ready there).
  Draining     OLD's elected pods move to NEW and the others, as cluster drain moves them
               (PodDisruptionBudgets hold, at-most-once pods one at a time, pods whose data is
               in OLD refused unless they chose flotilla.dev/on-volume-cluster-loss: recreate).
  Detaching    OLD leaves every Replicator (the Replicator controller removes what it put there).
  Removing     OLD leaves the fleet, as cluster remove does (its drain already done).

Nothing of OLD is changed before NEW is healthy with every Replicator's objects; a step that
cannot finish within --timeout stops the command with what is left, and running it again
carries on.

--dry-run prints what each step would change and changes nothing; with -o json or -o yaml it
prints that plan as one document (kind ReplacePlan: the steps it would run, the Replicators that
target OLD, those NEW would be added to, OLD's drain plan as cluster drain's, the Replicators OLD
would leave, and the error that would stop it). A dry run that would stop (NEW not Ready, pods
the drain would refuse) exits non-zero, after printing. -o applies to --dry-run only.`,
		Example: `  # Stand up secondary3, join it, then move everything of secondary1 to it
  flotillactl cluster join --secondary-context secondary3
  flotillactl cluster replace secondary1 --with secondary3 --dry-run
  # The same plan as one YAML document (or -o json)
  flotillactl cluster replace secondary1 --with secondary3 --dry-run -o yaml
  flotillactl cluster replace secondary1 --with secondary3 --timeout 30m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dry == dryrun.Server {
				return dry.Refuse("replace", "plans each step from what it reads and would write nothing the API server could check")
			}
			if err := checkPlanOutput(o.output, dry); err != nil {
				return err
			}
			o.dryRun = dry.On()
			if o.with == "" {
				return fmt.Errorf("--with NEW is required: the joined secondary that takes over %s", args[0])
			}
			primary, contextName, name, err := resolveTarget(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			_, _, newName, err := resolveTarget(cmd.Context(), g, o.with)
			if err != nil {
				return fmt.Errorf("--with: %w", err)
			}
			r := &replacer{primary: primary, old: name, oldContext: contextName, new: newName, o: o, out: cmd.OutOrStdout(),
				remove: func(ctx context.Context, timeout time.Duration) error {
					return removeCluster(ctx, g, primary, contextName, name, removeOptions{timeout: timeout, noDrain: true}, cmd.OutOrStdout())
				}}
			if o.output != "" {
				r.out, r.docOut = io.Discard, cmd.OutOrStdout()
			}
			return r.run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.with, "with", "", "the joined secondary that takes over (required)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long the whole replacement may take before it stops, saying what is left (run it again to carry on)")
	dryrun.AddFlag(cmd.Flags(), &dry, "print what each step would change and change nothing")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "with --dry-run: print the plan as one json or yaml document")
	return cmd
}

// replacer runs one replacement.
type replacer struct {
	primary         client.Client
	old, oldContext string
	new             string
	o               replaceOptions
	out             io.Writer
	// docOut is where a dry run with --output prints its plan, one document; out then gets none
	// of the steps' lines, which are for people.
	docOut io.Writer
	// plan is what a dry run finds each step would do, gathered as the steps run.
	plan *replaceDocument
	// remove retires the old cluster (cluster remove without its drain).
	remove func(ctx context.Context, timeout time.Duration) error
}

// replaceDocument is a replacement's dry run as --output prints it.
type replaceDocument struct {
	Kind string `json:"kind"`
	Old  string `json:"old"`
	New  string `json:"new"`
	// Steps are the steps the replacement would run, in order: from the one recorded when it
	// resumes.
	Steps []plannedStep `json:"steps"`
	// Replicators are those that target the old cluster: the new one must be healthy in each
	// before anything of the old one changes.
	Replicators []string `json:"replicators"`
	// AddNewTo are the Replicators the new cluster would be added to.
	AddNewTo []string `json:"addNewTo"`
	// Drain is the old cluster's drain plan (null when the replacement stops before it).
	Drain *drainDocument `json:"drain"`
	// RemoveOldFrom are the Replicators the old cluster would leave.
	RemoveOldFrom []string `json:"removeOldFrom"`
	// Error is what would stop the replacement at the last of Steps ("" when nothing would).
	Error string `json:"error"`
}

// plannedStep is one step of a replacement and what it does.
type plannedStep struct {
	Name string `json:"name"`
	Does string `json:"does"`
}

// resumeAt is the step a replacement starts at: the one recorded (an interrupted run), else the
// first. A replacement recorded with another cluster is refused.
func resumeAt(recorded *flotillav1.ReplacementState, with string) (string, error) {
	if recorded == nil {
		return stepChecking, nil
	}
	if recorded.With != with {
		return "", fmt.Errorf("a replacement by %s is under way (step %s): finish it with --with %s, or remove the annotation %s from the ClusterDetector to start over",
			recorded.With, recorded.Step, recorded.With, flotillav1.AnnotationReplacement)
	}
	if !slices.Contains(replaceSteps, recorded.Step) {
		return stepChecking, nil
	}
	return recorded.Step, nil
}

func (r *replacer) run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.timeout)
	defer cancel()
	recorded, err := r.recorded(ctx)
	if err != nil {
		return err
	}
	from, err := resumeAt(recorded, r.new)
	if err != nil {
		return err
	}
	if from != stepChecking {
		fmt.Fprintf(r.out, "Resuming the replacement of %s by %s at step %s.\n", r.old, r.new, from)
	}
	if r.o.dryRun {
		r.plan = &replaceDocument{Kind: "ReplacePlan", Old: r.old, New: r.new, Steps: []plannedStep{},
			Replicators: []string{}, AddNewTo: []string{}, RemoveOldFrom: []string{}}
	}
	start := time.Now()
	err = r.steps(ctx, from)
	if r.o.dryRun && r.o.output != "" {
		// The document comes first, whether or not the replacement would stop: it says where and why.
		if err != nil {
			r.plan.Error = err.Error()
		}
		if perr := printDocument(r.docOut, r.o.output, r.plan); perr != nil {
			return perr
		}
		return err
	}
	if err != nil {
		return err
	}
	if r.o.dryRun {
		_, err := fmt.Fprintln(r.out, "Dry run: nothing changed.")
		return err
	}
	_, err = fmt.Fprintf(r.out, "Replaced %s by %s in %s.\n", r.old, r.new, time.Since(start).Round(time.Second))
	return err
}

// steps runs the replacement's steps from the one named, in order, each recorded before it
// begins (unless a dry run).
func (r *replacer) steps(ctx context.Context, from string) error {
	for _, step := range replaceSteps[slices.Index(replaceSteps, from):] {
		if !r.o.dryRun && step != stepChecking {
			if err := r.record(ctx, step); err != nil {
				return err
			}
		}
		does := stepDoes(step, r.old, r.new)
		fmt.Fprintf(r.out, "[%s] %s\n", step, does)
		if r.plan != nil {
			r.plan.Steps = append(r.plan.Steps, plannedStep{Name: step, Does: does})
		}
		if err := r.do(ctx, step); err != nil {
			return fmt.Errorf("replacing %s by %s, step %s: %w (run the same command again to carry on)", r.old, r.new, step, err)
		}
	}
	return nil
}

func stepDoes(step, old, new string) string {
	switch step {
	case stepChecking:
		return fmt.Sprintf("checking that %s is joined, Running and Ready", new)
	case stepReplicating:
		return fmt.Sprintf("adding %s to every Replicator that targets %s, and waiting until each is healthy there", new, old)
	case stepDraining:
		return fmt.Sprintf("draining %s: its elected pods move to the other clusters", old)
	case stepDetaching:
		return fmt.Sprintf("removing %s from every Replicator", old)
	default:
		return fmt.Sprintf("removing %s from the fleet", old)
	}
}

func (r *replacer) do(ctx context.Context, step string) error {
	switch step {
	case stepChecking:
		return r.check(ctx)
	case stepReplicating:
		return r.replicate(ctx)
	case stepDraining:
		if r.o.dryRun {
			d := newDrainer(r.primary, r.old, drainOptions{dryRun: true}, r.out)
			plan, err := d.look(ctx)
			if err != nil {
				return err
			}
			if r.plan != nil {
				doc := drainDocumentOf(r.old, plan)
				r.plan.Drain = &doc
			}
			return d.dryRun(plan)
		}
		deadline, _ := ctx.Deadline()
		return newDrainer(r.primary, r.old, drainOptions{timeout: time.Until(deadline)}, r.out).run(ctx)
	case stepDetaching:
		return r.detach(ctx)
	default:
		if r.o.dryRun {
			return nil
		}
		deadline, _ := ctx.Deadline()
		return r.remove(ctx, time.Until(deadline))
	}
}

// recorded reads the replacement recorded on the old cluster's ClusterDetector (nil: none).
func (r *replacer) recorded(ctx context.Context) (*flotillav1.ReplacementState, error) {
	var cd flotillav1.ClusterDetector
	if err := r.primary.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: r.old}, &cd); err != nil {
		return nil, fmt.Errorf("reading the ClusterDetector of %s: %w", r.old, err)
	}
	raw, ok := cd.Annotations[flotillav1.AnnotationReplacement]
	if !ok {
		return nil, nil
	}
	var st flotillav1.ReplacementState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return nil, fmt.Errorf("the annotation %s on ClusterDetector %s does not parse (%w): remove it to start over", flotillav1.AnnotationReplacement, r.old, err)
	}
	return &st, nil
}

// record writes the step about to begin on the old cluster's ClusterDetector.
func (r *replacer) record(ctx context.Context, step string) error {
	raw, err := json.Marshal(flotillav1.ReplacementState{With: r.new, Step: step, Since: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	var cd flotillav1.ClusterDetector
	cd.Namespace, cd.Name = flotillav1.SystemNamespace, r.old
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, flotillav1.AnnotationReplacement, string(raw))
	if err := r.primary.Patch(ctx, &cd, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return fmt.Errorf("recording step %s on ClusterDetector %s: %w", step, r.old, err)
	}
	return nil
}

// check refuses a replacement whose new cluster cannot take the work now.
func (r *replacer) check(ctx context.Context) error {
	if r.new == r.old {
		return fmt.Errorf("%s cannot replace itself", r.old)
	}
	var cd flotillav1.ClusterDetector
	if err := r.primary.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: r.new}, &cd); err != nil {
		return fmt.Errorf("%s is not joined (no ClusterDetector): join it first (flotillactl cluster join): %w", r.new, err)
	}
	if cd.Labels[flotillav1.LabelRole] == flotillav1.RolePrimary {
		return fmt.Errorf("%s is the primary: replace a secondary by another secondary", r.new)
	}
	ready := meta.FindStatusCondition(cd.Status.Conditions, flotillav1.ConditionReady)
	if cd.Status.ClusterStatus != flotillav1.ClusterRunning || ready == nil || ready.Status != metav1.ConditionTrue {
		why := cd.Status.Message
		if why == "" {
			why = "not probed yet"
		}
		return fmt.Errorf("%s is not Running and Ready: %s", r.new, why)
	}
	return nil
}

// targetsOld says whether a Replicator targets the old cluster by one of its names (cluster,
// context, plumber's <cluster>.<user>); "*" targets every secondary, the new one already.
func (r *replacer) targetsOld(rep *flotillav1.Replicator, aliases []string) bool {
	for _, t := range rep.Spec.TargetCluster {
		if slices.Contains(aliases, t) {
			return true
		}
	}
	return false
}

// aliases are the names a Replicator may give the old cluster.
func (r *replacer) aliases(ctx context.Context) ([]string, error) {
	out := []string{r.old, r.oldContext}
	var cd flotillav1.ClusterDetector
	if err := r.primary.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: r.old}, &cd); err != nil {
		return nil, fmt.Errorf("reading the ClusterDetector of %s: %w", r.old, err)
	}
	if cd.Spec.Cluster != "" && cd.Spec.User != "" {
		out = append(out, cd.Spec.Cluster+"."+cd.Spec.User)
	}
	return out, nil
}

// replicators are the old cluster's names and every Replicator.
func (r *replacer) replicators(ctx context.Context) ([]string, *flotillav1.ReplicatorList, error) {
	aliases, err := r.aliases(ctx)
	if err != nil {
		return nil, nil, err
	}
	var reps flotillav1.ReplicatorList
	if err := r.primary.List(ctx, &reps); err != nil {
		return nil, nil, fmt.Errorf("listing Replicators: %w", err)
	}
	return aliases, &reps, nil
}

// replicate adds the new cluster to every Replicator that targets the old one and waits until
// each is healthy there.
func (r *replacer) replicate(ctx context.Context) error {
	aliases, reps, err := r.replicators(ctx)
	if err != nil {
		return err
	}
	var mine []client.ObjectKey
	for i := range reps.Items {
		rep := &reps.Items[i]
		all := slices.Equal(rep.Spec.TargetCluster, []string{"*"})
		if !all && !r.targetsOld(rep, aliases) {
			continue
		}
		mine = append(mine, client.ObjectKeyFromObject(rep))
		if r.plan != nil {
			r.plan.Replicators = append(r.plan.Replicators, rep.Name)
		}
		if all || slices.Contains(rep.Spec.TargetCluster, r.new) {
			continue
		}
		if r.o.dryRun {
			fmt.Fprintf(r.out, "  would add %s to Replicator %s\n", r.new, rep.Name)
			if r.plan != nil {
				r.plan.AddNewTo = append(r.plan.AddNewTo, rep.Name)
			}
			continue
		}
		if err := r.editTargets(ctx, rep, func(targets []string) []string {
			if slices.Contains(targets, r.new) || slices.Equal(targets, []string{"*"}) {
				return targets
			}
			return append(targets, r.new)
		}); err != nil {
			return fmt.Errorf("adding %s to Replicator %s: %w", r.new, rep.Name, err)
		}
		fmt.Fprintf(r.out, "  added %s to Replicator %s\n", r.new, rep.Name)
	}
	if len(mine) == 0 {
		fmt.Fprintf(r.out, "  no Replicator targets %s\n", r.old)
		return nil
	}
	if r.o.dryRun {
		return nil
	}
	return r.waitHealthy(ctx, mine)
}

// waitHealthy waits until each Replicator is healthy in the new cluster, saying which it waits
// for every 10 s.
func (r *replacer) waitHealthy(ctx context.Context, mine []client.ObjectKey) error {
	lastSaid := time.Time{}
	for {
		var waiting []string
		for _, key := range mine {
			var rep flotillav1.Replicator
			if err := r.primary.Get(ctx, key, &rep); err != nil {
				return fmt.Errorf("reading Replicator %s: %w", key.Name, err)
			}
			if ok, why := replicatorHealthyIn(&rep, r.new); !ok {
				waiting = append(waiting, fmt.Sprintf("%s (%s)", key.Name, why))
			}
		}
		sort.Strings(waiting)
		if len(waiting) == 0 {
			fmt.Fprintf(r.out, "  %d Replicator(s) healthy in %s\n", len(mine), r.new)
			return nil
		}
		if time.Since(lastSaid) >= 10*time.Second {
			fmt.Fprintf(r.out, "  %d of %d Replicator(s) healthy in %s; waiting for %s\n", len(mine)-len(waiting), len(mine), r.new, strings.Join(waiting, ", "))
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy in %s: %s: %w", r.new, strings.Join(waiting, ", "), ctx.Err())
		case <-time.After(r.o.poll):
		}
	}
}

// replicatorHealthyIn says whether a Replicator's objects are applied at its latest spec and
// healthy in a cluster (the Replicator's own judgement: Deployments available, Services with
// endpoints, Ingresses admitted, TLS Secrets valid), and if not, why.
func replicatorHealthyIn(rep *flotillav1.Replicator, cluster string) (bool, string) {
	if rep.Status.ObservedGeneration < rep.Generation {
		return false, "its latest spec not handled yet"
	}
	for _, c := range rep.Status.Clusters {
		if c.Name != cluster {
			continue
		}
		switch {
		case c.Held:
			return false, "held for its rollout wave"
		case !c.Synced:
			return false, "not applied there yet: " + orDash(c.Message)
		case c.ObservedGeneration < rep.Generation:
			return false, "its latest spec not applied there yet"
		case !c.Healthy:
			for _, h := range c.Health {
				if !h.Healthy {
					return false, fmt.Sprintf("%s %s %s: %s", h.Kind, h.Name, h.Reason, orDash(h.Message))
				}
			}
			return false, "not judged healthy yet"
		}
		return true, ""
	}
	return false, "not reported there yet"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// editTargets sets a Replicator's target clusters to edit's answer for them. The patch carries
// the resourceVersion, so an edit made meanwhile by someone else is never overwritten; on a
// conflict (the Replicator's controller writes its status all the time) it reads the Replicator
// again and edits that.
func (r *replacer) editTargets(ctx context.Context, rep *flotillav1.Replicator, edit func([]string) []string) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.primary.Get(ctx, client.ObjectKeyFromObject(rep), rep); err != nil {
				return err
			}
		}
		first = false
		base := rep.DeepCopy()
		rep.Spec.TargetCluster = edit(slices.Clone(rep.Spec.TargetCluster))
		if slices.Equal(rep.Spec.TargetCluster, base.Spec.TargetCluster) {
			return nil
		}
		return r.primary.Patch(ctx, rep, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}

// detach removes the old cluster from every Replicator that names it.
func (r *replacer) detach(ctx context.Context) error {
	aliases, reps, err := r.replicators(ctx)
	if err != nil {
		return err
	}
	for i := range reps.Items {
		rep := &reps.Items[i]
		if !r.targetsOld(rep, aliases) {
			continue
		}
		if r.o.dryRun {
			fmt.Fprintf(r.out, "  would remove %s from Replicator %s\n", r.old, rep.Name)
			if r.plan != nil {
				r.plan.RemoveOldFrom = append(r.plan.RemoveOldFrom, rep.Name)
			}
			continue
		}
		if err := r.editTargets(ctx, rep, func(targets []string) []string {
			return slices.DeleteFunc(targets, func(t string) bool { return slices.Contains(aliases, t) })
		}); err != nil {
			return fmt.Errorf("removing %s from Replicator %s: %w", r.old, rep.Name, err)
		}
		fmt.Fprintf(r.out, "  removed %s from Replicator %s\n", r.old, rep.Name)
	}
	return nil
}
