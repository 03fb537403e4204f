package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// `cluster remove --dry-run`: every step of removeCluster, read and not done. It goes by the same
// checks and the same drain plan, so it meets the refusals remove would meet; it reads the
// secondary with the user's own credentials as the clean-up would, and deletes nothing there.

// removeDocument is what remove would do, as --output prints it.
type removeDocument struct {
	Kind    string `json:"kind"`
	Cluster string `json:"cluster"`
	// Context is the registration's context remove would delete from the registration Secret.
	Context     string `json:"context"`
	VirtualNode string `json:"virtualNode"`
	// Cordon says whether remove would cordon the virtual node (false: it is gone already).
	Cordon bool `json:"cordon"`
	// Drain is the drain remove would run first (null with --no-drain or --orphan, or without a
	// virtual node).
	Drain *drainDocument `json:"drain"`
	// DeleteProxies are the proxies remove would delete without evicting them: all of them with
	// --no-drain, else those a drain leaves (a DaemonSet's).
	DeleteProxies []string `json:"deleteProxies"`
	// OrphanProxies are the proxies --orphan would leave running, their delegates with them.
	OrphanProxies []string `json:"orphanProxies"`
	// FlotillaPrimary is this primary's FlotillaPrimary remove would delete in the secondary with
	// the registered credentials ("" when it would not); Propagation is that deletion's: Background
	// (the secondary's garbage collector removes what it owns) or Orphan (what it owns keeps running).
	FlotillaPrimary string `json:"flotillaPrimary"`
	Propagation     string `json:"propagation"`
	// Secondary is what remove would delete in the secondary with the user's own credentials.
	Secondary secondaryCleanupDocument `json:"secondary"`
	// Warnings are what remove would warn of and go on.
	Warnings []string `json:"warnings"`
	// Refusals are what remove would refuse before it changes anything; it would stop at the first.
	Refusals []string `json:"refusals"`
	// drainPlan is Drain's plan, for the text.
	drainPlan drainPlan
}

// secondaryCleanupDocument is what remove would delete in the secondary, and leave, with the
// user's own credentials, as the secondary is now.
type secondaryCleanupDocument struct {
	// Context is the user's context for the secondary.
	Context string `json:"context"`
	// Unreachable says why that context cannot clean up ("" when it can): remove would then leave
	// what join made there, and say so.
	Unreachable string `json:"unreachable"`
	// SetMembers are this primary's ClusterSet objects there (resource namespace/name).
	SetMembers []string `json:"setMembers"`
	// Namespaces are the namespaces Flotilla created there that hold nothing else; LeftNamespaces
	// those it would leave, each with what else it holds (not deleted with --orphan).
	Namespaces     []string `json:"namespaces"`
	LeftNamespaces []string `json:"leftNamespaces"`
	// Access are join's objects for this primary; LeftAccess those of the same names without this
	// primary's label.
	Access     []string `json:"access"`
	LeftAccess []string `json:"leftAccess"`
}

// secondaryReach connects to a registered secondary with the user's own credentials: the
// context named, checked to reach the cluster of that ID.
type secondaryReach func(ctx context.Context, contextName, clusterID string) (secondaryClients, error)

// dryRunRemove prints what removeCluster would do, as text or one document, and then fails with
// the first refusal removeCluster would meet, as removeCluster would word it.
func dryRunRemove(ctx context.Context, primary client.Client, contextName, name string, o removeOptions, reach secondaryReach, out io.Writer) error {
	doc, refusal, err := planRemoval(ctx, primary, contextName, name, o, reach)
	if err != nil {
		return err
	}
	if o.output != "" {
		if err := printDocument(out, o.output, doc); err != nil {
			return err
		}
	} else if err := printRemoval(out, doc, o); err != nil {
		return err
	}
	return refusal
}

// planRemoval reads what removeCluster would do, in its order, and the first refusal it would
// meet (nil when none). err is for what could not be read.
func planRemoval(ctx context.Context, primary client.Client, contextName, name string, o removeOptions,
	reach secondaryReach) (doc removeDocument, refusal error, err error) {
	nodeName := flotillav1.VirtualNodeName(name)
	doc = removeDocument{Kind: "RemovePlan", Cluster: name, Context: contextName, VirtualNode: nodeName,
		DeleteProxies: []string{}, OrphanProxies: []string{}, Warnings: []string{}, Refusals: []string{}}
	refuse := func(err error) {
		doc.Refusals = append(doc.Refusals, err.Error())
		if refusal == nil {
			refusal = err
		}
	}
	var cd flotillav1.ClusterDetector
	if err := primary.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}, &cd); err != nil && !apierrors.IsNotFound(err) {
		return doc, nil, fmt.Errorf("reading ClusterDetector %s: %w", name, err)
	}
	primaryID, err := clusters.ClusterID(ctx, primary)
	if err != nil {
		return doc, nil, fmt.Errorf("primary: %w", err)
	}
	// removeCluster's checks, each refusal kept: the dry run lists them all.
	if !o.orphan && !o.deleteVolumes {
		if err := checkVolumes(ctx, primary, name); err != nil {
			refuse(err)
		}
	}
	if o.orphan {
		var warning bytes.Buffer
		if err := checkOrphan(ctx, primary, name, nodeName, o.force, &warning); err != nil {
			refuse(err)
		}
		if w := strings.TrimSpace(warning.String()); w != "" {
			doc.Warnings = append(doc.Warnings, w)
		}
	}
	drainRefusal, err := planClearNode(ctx, primary, name, o, &doc)
	if err != nil {
		return doc, nil, err
	}
	if drainRefusal != nil {
		refuse(drainRefusal)
	}
	if err := planOwner(ctx, primary, contextName, name, primaryID, o.orphan, &doc); err != nil {
		return doc, nil, err
	}
	// cleanUpSecondary's, read and not done.
	doc.Secondary, err = planSecondaryCleanup(ctx, reach, o, contextName, name, primaryID, cd.Status.ClusterID)
	return doc, refusal, err
}

// planClearNode reads what clearNode would do into doc: the drain and the proxies it leaves, or
// the cordon and the proxies deleted or orphaned. refusal is the drain's, as remove words it.
func planClearNode(ctx context.Context, primary client.Client, name string, o removeOptions, doc *removeDocument) (refusal, err error) {
	nodeName := flotillav1.VirtualNodeName(name)
	switch err := primary.Get(ctx, client.ObjectKey{Name: nodeName}, &corev1.Node{}); {
	case err == nil && !o.orphan && !o.noDrain:
		plan, err := newDrainer(primary, name, removeDrainOptions(o), io.Discard).look(ctx)
		if err != nil {
			return nil, err
		}
		drainDoc := drainDocumentOf(name, plan)
		doc.Drain, doc.drainPlan, doc.Cordon = &drainDoc, plan, true
		for _, v := range plan.ignored {
			doc.DeleteProxies = append(doc.DeleteProxies, v.key()) // left by the drain
		}
		if len(plan.refused) > 0 {
			return drainBeforeRemoving(name, refusedDrain(name, plan)), nil
		}
		return nil, nil
	case err == nil:
		doc.Cordon = true
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading %s: %w", nodeName, err)
	}
	proxies, err := boundProxies(ctx, primary, nodeName)
	if err != nil {
		return nil, err
	}
	for _, p := range proxies {
		if o.orphan {
			doc.OrphanProxies = append(doc.OrphanProxies, p.Namespace+"/"+p.Name)
		} else {
			doc.DeleteProxies = append(doc.DeleteProxies, p.Namespace+"/"+p.Name)
		}
	}
	return nil, nil
}

// planOwner reads what deleteOwner would do into doc: delete this primary's FlotillaPrimary in
// the secondary, only with a registered context the registry accepts.
func planOwner(ctx context.Context, primary client.Client, contextName, name, primaryID string, orphan bool, doc *removeDocument) error {
	reg, err := clusters.ReadRegistration(ctx, primary)
	if err != nil {
		return err
	}
	if _, ok := reg.Contexts[contextName]; !ok {
		return nil
	}
	if err := clusters.ValidateContext(reg, contextName); err != nil {
		doc.Warnings = append(doc.Warnings, fmt.Sprintf("not deleting FlotillaPrimary %s in %s with the registered credentials: %v", primaryID, name, err))
		return nil
	}
	doc.FlotillaPrimary, doc.Propagation = primaryID, "Background"
	if orphan {
		doc.Propagation = "Orphan"
	}
	return nil
}

// planSecondaryCleanup reads what cleanUpSecondary would delete in the secondary, and leave. A
// secondary the user's context cannot reach is said, not an error: remove goes on without it.
func planSecondaryCleanup(ctx context.Context, reach secondaryReach, o removeOptions, contextName, name, primaryID, clusterID string) (secondaryCleanupDocument, error) {
	doc := secondaryCleanupDocument{Context: o.context, SetMembers: []string{}, Namespaces: []string{}, LeftNamespaces: []string{},
		Access: []string{}, LeftAccess: []string{}}
	if doc.Context == "" {
		doc.Context = contextName
	}
	sc, err := reach(ctx, doc.Context, clusterID)
	if err != nil {
		doc.Unreachable = err.Error()
		return doc, nil
	}
	members, err := setMembers(ctx, sc.dynamic, name, primaryID)
	if err != nil {
		return doc, err
	}
	for _, m := range members {
		doc.SetMembers = append(doc.SetMembers, m.String())
	}
	if !o.orphan {
		empty, left, err := namespacesToRemove(ctx, sc, name, primaryID)
		if err != nil {
			return doc, err
		}
		for _, ns := range empty {
			doc.Namespaces = append(doc.Namespaces, ns.Name)
		}
		for _, l := range left {
			doc.LeftNamespaces = append(doc.LeftNamespaces, l.name+": it also holds "+strings.Join(l.holds, ", "))
		}
	}
	ours, left, err := accessToRemove(ctx, sc.client, name, primaryID)
	if err != nil {
		return doc, err
	}
	for _, obj := range ours {
		doc.Access = append(doc.Access, accessName(obj))
	}
	doc.LeftAccess = append(doc.LeftAccess, left...)
	return doc, nil
}

// printRemoval prints a removal's plan for people, one step a line.
func printRemoval(out io.Writer, doc removeDocument, o removeOptions) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Dry run: nothing is changed. Removing %s (context %s) would:\n", doc.Cluster, doc.Context)
	switch {
	case doc.Drain != nil:
		fmt.Fprintf(&b, "  drain %s first, as cluster drain does:\n", doc.VirtualNode)
		printDrainSteps(&b, "    ", doc.Cluster, doc.drainPlan)
		if len(doc.DeleteProxies) > 0 {
			fmt.Fprintf(&b, "  then delete the proxies the drain leaves: %s\n", strings.Join(doc.DeleteProxies, ", "))
		}
	case doc.Cordon:
		fmt.Fprintf(&b, "  cordon %s\n", doc.VirtualNode)
	}
	if doc.Drain == nil && len(doc.DeleteProxies) > 0 {
		fmt.Fprintf(&b, "  delete its %d proxies at once, PodDisruptionBudgets aside, and wait for their delegates to go: %s\n",
			len(doc.DeleteProxies), strings.Join(doc.DeleteProxies, ", "))
	}
	if len(doc.OrphanProxies) > 0 {
		fmt.Fprintf(&b, "  leave its %d proxies and their delegates running (--orphan): %s\n", len(doc.OrphanProxies), strings.Join(doc.OrphanProxies, ", "))
	}
	switch {
	case doc.FlotillaPrimary != "" && o.orphan:
		fmt.Fprintf(&b, "  delete FlotillaPrimary %s in %s with the registered credentials, orphaning what it owns (delegates keep running)\n",
			doc.FlotillaPrimary, doc.Cluster)
	case doc.FlotillaPrimary != "":
		fmt.Fprintf(&b, "  delete FlotillaPrimary %s in %s with the registered credentials: its garbage collector then removes what this primary made there\n",
			doc.FlotillaPrimary, doc.Cluster)
	}
	fmt.Fprintf(&b, "  remove context %s from the registration (Secret %s/%s) and record %s as removed\n",
		doc.Context, flotillav1.SystemNamespace, flotillav1.KubeconfigSecretName, doc.Cluster)
	fmt.Fprintf(&b, "  wait until the manager has deleted %s and ClusterDetector %s\n", doc.VirtualNode, doc.Cluster)
	s := doc.Secondary
	if s.Unreachable != "" {
		fmt.Fprintf(&b, "  not clean up in %s: context %s: %s (what join made there stays)\n", doc.Cluster, s.Context, s.Unreachable)
	} else {
		fmt.Fprintf(&b, "  in %s, with your context %s:\n", doc.Cluster, s.Context)
		lines := 0
		say := func(verb string, items []string, why string) {
			for _, item := range items {
				fmt.Fprintf(&b, "    %s %s%s\n", verb, item, why)
				lines++
			}
		}
		say("delete", s.SetMembers, " (this primary's ClusterSet)")
		say("delete namespace", s.Namespaces, " (created by Flotilla, nothing else in it)")
		say("leave namespace", s.LeftNamespaces, "")
		say("delete", s.Access, "")
		say("leave", s.LeftAccess, ": it does not carry this primary's label "+flotillav1.LabelPrimary)
		if lines == 0 {
			b.WriteString("    nothing of this primary's is left there\n")
		}
	}
	for _, w := range doc.Warnings {
		fmt.Fprintf(&b, "  warn: %s\n", w)
	}
	for _, r := range doc.Refusals {
		fmt.Fprintf(&b, "  refuse: %s\n", strings.ReplaceAll(r, "\n", "\n    "))
	}
	_, err := io.WriteString(out, b.String())
	return err
}
