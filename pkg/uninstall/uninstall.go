package uninstall

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/spf13/pflag"

	"github.com/flotilla-dev/flotilla/internal/dryrun"
	"github.com/flotilla-dev/flotilla/internal/installnames"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// ErrInUse says that elected pods or Replicators still exist and Orphan was not given.
var ErrInUse = errors.New("flotilla is still in use")

// Options say what to remove and how.
type Options struct {
	// Namespace is where the manager's Deployment and Lease are (the release's namespace). Default
	// flotilla-system. Its Secrets are always in flotilla-system.
	Namespace string
	// NamePrefix names the manager's objects (flotillav1.NamesFrom): the chart's fullname.
	// Default flotilla.
	NamePrefix string
	// Deployment is the manager's Deployment, scaled to zero first so that no replica recreates
	// what this removes. Default <NamePrefix>-manager. A missing one is fine (out of cluster).
	Deployment string
	// Lease is the manager's leader-election Lease: while a manager renews it, nothing is removed.
	// Default <NamePrefix>-manager.flotilla.dev.
	Lease string
	// Orphan lets elected pods and Replicators go: Flotilla's finalizers are removed, their
	// delegates and copies keep running in the secondaries, unmanaged.
	Orphan bool
	// DryRun reports what would be removed and removes nothing (--dry-run: client; server is
	// refused: the removal plans from what it reads).
	DryRun dryrun.Mode
	// Output prints a dry run's Plan as one json or yaml document ("": text).
	Output string
	// Timeout bounds the wait for the manager to stop. Default 2m.
	Timeout time.Duration
	// Out receives one line per step.
	Out io.Writer
}

// AddFlags adds the options' flags: flotillactl uninstall and flotilla-manager uninstall (the
// chart's hook) take the same ones.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Namespace, "namespace", flotillav1.SystemNamespace, "namespace of the manager's Deployment and leader Lease")
	fs.StringVar(&o.NamePrefix, "name-prefix", "", "prefix of the names of the manager's objects, the chart's fullname (default: read from the manager's Deployment, else flotilla)")
	fs.StringVar(&o.Deployment, "deployment", "", "the manager's Deployment, scaled to zero first (default <name-prefix>-manager)")
	fs.BoolVar(&o.Orphan, "orphan", false, "let elected pods and Replicators go: their delegates and copies keep running in the secondaries, unmanaged")
	dryrun.AddFlag(fs, &o.DryRun, "say what would be removed, remove nothing")
	fs.StringVarP(&o.Output, "output", "o", "", "with --dry-run: print the plan as one json or yaml document (kind UninstallPlan)")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "how long to wait for the manager to stop")
}

func (o *Options) defaults() {
	if o.Namespace == "" {
		o.Namespace = flotillav1.SystemNamespace
	}
	names := o.names()
	if o.Deployment == "" {
		o.Deployment = names.ManagerDeployment
	}
	if o.Lease == "" {
		o.Lease = names.ManagerLease
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// InUse is what still depends on Flotilla in the primary.
type InUse struct {
	Proxies     []string `json:"proxies"`     // namespace/name of proxy pods
	Replicators []string `json:"replicators"` // namespace/name of Replicators
	// Claims are namespace/name of claims of class flotilla Flotilla holds (their data is in a
	// secondary, and only Flotilla deletes it with them).
	Claims []string `json:"claims"`
}

// orEmpty is u with [] for each list that is nil, as a document prints it.
func (u InUse) orEmpty() InUse {
	for _, l := range []*[]string{&u.Proxies, &u.Replicators, &u.Claims} {
		if *l == nil {
			*l = []string{}
		}
	}
	return u
}

// Empty says nothing depends on Flotilla.
func (u InUse) Empty() bool {
	return len(u.Proxies) == 0 && len(u.Replicators) == 0 && len(u.Claims) == 0
}

func (u InUse) String() string {
	var parts []string
	if len(u.Proxies) > 0 {
		parts = append(parts, fmt.Sprintf("%d elected pod(s): %s", len(u.Proxies), abbreviate(u.Proxies)))
	}
	if len(u.Replicators) > 0 {
		parts = append(parts, fmt.Sprintf("%d Replicator(s): %s", len(u.Replicators), abbreviate(u.Replicators)))
	}
	if len(u.Claims) > 0 {
		parts = append(parts, fmt.Sprintf("%d claim(s) of class %s: %s", len(u.Claims), flotillav1.StorageClassRemote, abbreviate(u.Claims)))
	}
	return strings.Join(parts, "; ")
}

func abbreviate(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// Survey lists what still depends on Flotilla.
func Survey(ctx context.Context, c client.Reader) (InUse, error) {
	var u InUse
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.HasLabels{flotillav1.LabelProxy}); err != nil {
		return u, fmt.Errorf("listing proxies: %w", err)
	}
	for i := range pods.Items {
		u.Proxies = append(u.Proxies, client.ObjectKeyFromObject(&pods.Items[i]).String())
	}
	var reps flotillav1.ReplicatorList
	if err := c.List(ctx, &reps); err != nil && !isNoCRD(err) {
		return u, fmt.Errorf("listing Replicators: %w", err)
	}
	for i := range reps.Items {
		u.Replicators = append(u.Replicators, client.ObjectKeyFromObject(&reps.Items[i]).String())
	}
	var claims corev1.PersistentVolumeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return u, fmt.Errorf("listing claims: %w", err)
	}
	for i := range claims.Items {
		if controllerutil.ContainsFinalizer(&claims.Items[i], flotillav1.FinalizerVolume) {
			u.Claims = append(u.Claims, client.ObjectKeyFromObject(&claims.Items[i]).String())
		}
	}
	sort.Strings(u.Proxies)
	sort.Strings(u.Replicators)
	sort.Strings(u.Claims)
	return u, nil
}

// Run removes what the manager created. It refuses (ErrInUse), changing nothing, while elected pods
// or Replicators exist, unless Orphan.
func Run(ctx context.Context, c client.Client, o Options) error {
	if o.DryRun == dryrun.Server {
		return o.DryRun.Refuse("uninstall", "plans its removal from what it reads and would write nothing the API server could check")
	}
	switch {
	case o.Output != "" && o.Output != "json" && o.Output != "yaml":
		return fmt.Errorf("--output %q: want one of json, yaml, or no --output", o.Output)
	case o.Output != "" && !o.DryRun.On():
		return fmt.Errorf("--output %s applies to --dry-run: it prints the plan as one document; add --dry-run to see the plan, or leave out --output to act", o.Output)
	}
	if o.NamePrefix == "" && o.Deployment == "" {
		// The chart's hook is told; flotillactl reads it from the manager's Deployment.
		names, err := installnames.Find(ctx, c, cmp.Or(o.Namespace, flotillav1.SystemNamespace))
		if err != nil {
			return err
		}
		o.NamePrefix = names.Prefix
	}
	o.defaults()
	inUse, err := Survey(ctx, c)
	if err != nil {
		return err
	}
	var refusal error
	if !inUse.Empty() && !o.Orphan {
		refusal = fmt.Errorf("%w: %s. Delete them (or remove %s from the pods) first, or orphan them: "+
			"their delegates, copies and real claims then stay in the secondaries, unmanaged", ErrInUse, inUse, flotillav1.AnnotationElect)
	}
	if o.DryRun.On() {
		plan, err := planRemoval(ctx, c, o, inUse, refusal)
		if err != nil {
			return err
		}
		if err := plan.print(o.Out, o.Output); err != nil {
			return err
		}
		return refusal
	}
	if refusal != nil {
		return refusal
	}
	if err := stopManager(ctx, c, o); err != nil {
		return err
	}
	steps := []func(context.Context, client.Client, Options) error{
		deleteWebhookConfiguration, // first: from here on no pod creation can fail on Flotilla's webhook
		releaseProxies,
		releaseReplicators,
		releaseClaims,
		deleteVirtualNodes,
		deleteClusterDetectors,
		deleteSecrets,
		deleteLease,
	}
	for _, step := range steps {
		if err := step(ctx, c, o); err != nil {
			return err
		}
	}
	say(o.Out, "Flotilla's run-time objects are gone from the primary; the CRDs stay (helm's resource policy), see docs/install.md#uninstall")
	return nil
}

func say(out io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(out, format+"\n", args...) }

// isNoCRD says the API has no such kind (its CRD was never installed or is gone): nothing to do.
func isNoCRD(err error) bool { return apierrors.IsNotFound(err) || meta.IsNoMatchError(err) }

// stopManager scales the manager's Deployment to zero and waits until no manager holds the Lease,
// so no replica recreates the webhook configuration or a virtual node behind this.
func stopManager(ctx context.Context, c client.Client, o Options) error {
	var d appsv1.Deployment
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Deployment}, &d)
	switch {
	case apierrors.IsNotFound(err):
		say(o.Out, "no Deployment %s/%s (a manager out of cluster must be stopped by you)", o.Namespace, o.Deployment)
	case err != nil:
		return fmt.Errorf("reading the manager's Deployment: %w", err)
	case d.Spec.Replicas == nil || *d.Spec.Replicas != 0:
		patch := client.MergeFrom(d.DeepCopy())
		zero := int32(0)
		d.Spec.Replicas = &zero
		if err := c.Patch(ctx, &d, patch); err != nil {
			return fmt.Errorf("scaling the manager's Deployment to zero: %w", err)
		}
		say(o.Out, "scaled Deployment %s/%s to zero", o.Namespace, o.Deployment)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, o.Timeout, true, func(ctx context.Context) (bool, error) {
		held, holder, err := leaseHeld(ctx, c, o, time.Now())
		last = holder
		return !held, err
	})
	if err != nil {
		return fmt.Errorf("a manager (%s) still holds Lease %s/%s after %s: stop it first: %w", last, o.Namespace, o.Lease, o.Timeout, err)
	}
	return nil
}

// leaseHeld says whether a manager holds the Lease now: a holder and a renewal within its duration.
func leaseHeld(ctx context.Context, c client.Reader, o Options, now time.Time) (bool, string, error) {
	var l coordinationv1.Lease
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Lease}, &l)
	if apierrors.IsNotFound(err) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading the leader Lease: %w", err)
	}
	return Held(&l, now), ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// Held says whether a Lease has a holder that renewed it within its duration.
func Held(l *coordinationv1.Lease, now time.Time) bool {
	if ptr.Deref(l.Spec.HolderIdentity, "") == "" || l.Spec.RenewTime == nil {
		return false
	}
	d := 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return now.Before(l.Spec.RenewTime.Add(d))
}

// names are the manager's objects' names, from NamePrefix.
func (o Options) names() flotillav1.InstallNames { return flotillav1.NamesFrom(o.NamePrefix) }

func deleteWebhookConfiguration(ctx context.Context, c client.Client, o Options) error {
	name := o.names().WebhookConfiguration
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	return deleteOne(ctx, c, cfg, "MutatingWebhookConfiguration "+name, o.Out)
}

// releaseProxies removes Flotilla's finalizer from the proxies (Orphan only: otherwise there are none).
func releaseProxies(ctx context.Context, c client.Client, o Options) error {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.HasLabels{flotillav1.LabelProxy}); err != nil {
		return fmt.Errorf("listing proxies: %w", err)
	}
	for i := range pods.Items {
		if err := removeFinalizer(ctx, c, &pods.Items[i], flotillav1.FinalizerDelegate); err != nil {
			return err
		}
	}
	if len(pods.Items) > 0 {
		say(o.Out, "orphaned %d elected pod(s): their delegates keep running in the secondaries", len(pods.Items))
	}
	return nil
}

// releaseClaims removes Flotilla's finalizer from claims of class flotilla (Orphan only): their
// real claims, and the data, stay in the secondaries.
func releaseClaims(ctx context.Context, c client.Client, o Options) error {
	var claims corev1.PersistentVolumeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	n := 0
	for i := range claims.Items {
		if !controllerutil.ContainsFinalizer(&claims.Items[i], flotillav1.FinalizerVolume) {
			continue
		}
		if err := removeFinalizer(ctx, c, &claims.Items[i], flotillav1.FinalizerVolume); err != nil {
			return err
		}
		n++
	}
	if n > 0 {
		say(o.Out, "orphaned %d claim(s) of class %s: their real claims, and their data, stay in the secondaries", n, flotillav1.StorageClassRemote)
	}
	return nil
}

// releaseReplicators removes Flotilla's finalizer from Replicators (Orphan only).
func releaseReplicators(ctx context.Context, c client.Client, o Options) error {
	var reps flotillav1.ReplicatorList
	if err := c.List(ctx, &reps); err != nil {
		if isNoCRD(err) {
			return nil
		}
		return fmt.Errorf("listing Replicators: %w", err)
	}
	for i := range reps.Items {
		if err := removeFinalizer(ctx, c, &reps.Items[i], flotillav1.FinalizerReplicator); err != nil {
			return err
		}
	}
	if len(reps.Items) > 0 {
		say(o.Out, "orphaned %d Replicator(s): their copies stay in the secondaries", len(reps.Items))
	}
	return nil
}

func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing %s from %s: %w", finalizer, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// deleteVirtualNodes deletes the nodes Flotilla registered: virtual-kubelet nodes of a cluster,
// named with Flotilla's prefix. Other virtual-kubelet nodes are someone else's.
func deleteVirtualNodes(ctx context.Context, c client.Client, o Options) error {
	nodes, err := flotillasNodes(ctx, c)
	if err != nil {
		return err
	}
	for i := range nodes {
		if err := deleteOne(ctx, c, &nodes[i], "virtual node "+nodes[i].Name, o.Out); err != nil {
			return err
		}
	}
	return nil
}

// flotillasNodes are the virtual-kubelet nodes of a cluster named with Flotilla's prefix.
func flotillasNodes(ctx context.Context, c client.Reader) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels{flotillav1.LabelNodeType: flotillav1.NodeTypeVirtualKubelet}, client.HasLabels{flotillav1.LabelCluster}); err != nil {
		return nil, fmt.Errorf("listing virtual nodes: %w", err)
	}
	var ours []corev1.Node
	for _, n := range nodes.Items {
		if _, ok := flotillav1.ClusterOfNode(n.Name); ok {
			ours = append(ours, n)
		}
	}
	return ours, nil
}

func deleteClusterDetectors(ctx context.Context, c client.Client, o Options) error {
	cds, err := clusterDetectors(ctx, c)
	if err != nil {
		return err
	}
	for i := range cds {
		if err := deleteOne(ctx, c, &cds[i], "ClusterDetector "+cds[i].Name, o.Out); err != nil {
			return err
		}
	}
	return nil
}

// clusterDetectors are every ClusterDetector; none where the CRD is not installed.
func clusterDetectors(ctx context.Context, c client.Reader) ([]flotillav1.ClusterDetector, error) {
	var cds flotillav1.ClusterDetectorList
	if err := c.List(ctx, &cds); err != nil {
		if isNoCRD(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing ClusterDetectors: %w", err)
	}
	return cds.Items, nil
}

// deleteSecrets deletes the webhook's CA and the registration (the secondaries' credentials: a
// joined identity stays valid in its secondary until its token expires or `flotillactl cluster
// remove` deletes it there).
func deleteSecrets(ctx context.Context, c client.Client, o Options) error {
	// The chart's cert-manager Certificate (webhook.certManager.enabled) before its Secret: while it
	// exists, cert-manager issues a deleted Secret again. Where cert-manager is not installed there
	// is none.
	names := o.names()
	cert := certificate(names)
	if err := deleteOne(ctx, c, cert, "Certificate "+flotillav1.SystemNamespace+"/"+names.WebhookCertificate, o.Out); err != nil && !meta.IsNoMatchError(err) {
		return err
	}
	for _, name := range SecretNames(names) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: name}}
		if err := deleteOne(ctx, c, s, "Secret "+flotillav1.SystemNamespace+"/"+name, o.Out); err != nil {
			return err
		}
	}
	// The CA's published certificate: public, but the manager's, and of no use once it is gone.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: names.CAConfigMap}}
	return deleteOne(ctx, c, cm, "ConfigMap "+flotillav1.SystemNamespace+"/"+names.CAConfigMap, o.Out)
}

func deleteLease(ctx context.Context, c client.Client, o Options) error {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Lease}}
	return deleteOne(ctx, c, l, "Lease "+o.Namespace+"/"+o.Lease, o.Out)
}

func deleteOne(ctx context.Context, c client.Client, obj client.Object, what string, out io.Writer) error {
	err := c.Delete(ctx, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("deleting %s: %w", what, err)
	}
	say(out, "deleted %s", what)
	return nil
}

// SecretNames are the manager's own Secrets in flotilla-system, which an uninstall deletes (the
// chart's pre-delete Job may delete these names, and only these).
func SecretNames(names flotillav1.InstallNames) []string {
	return []string{names.WebhookCASecret, names.WebhookTLSSecret, flotillav1.KubeconfigSecretName, names.SealSecret}
}
