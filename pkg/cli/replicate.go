package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/internal/dryrun"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// replicateOptions are the flags of `flotillactl replicate`.
type replicateOptions struct {
	namespace string
	to        []string
	name      string
	dryRun    dryrun.Mode
	output    string
	// adopt accepts that the namespace's objects become the Replicator's (deleted with it).
	adopt bool
}

const replicateLong = `Create a Replicator that carries what a namespace of the primary holds to the clusters
given with --to, or extend the Replicator of that name: add the clusters to its targetCluster and
the namespace's objects it does not carry yet to its resources.

What is taken: the namespace's ConfigMaps, Services, Ingresses, Deployments, StatefulSets,
DaemonSets, Jobs, CronJobs, ServiceAccounts, PodDisruptionBudgets, HorizontalPodAutoscalers and
NetworkPolicies, as their spec stands (status, server-set fields, a Service's cluster IPs and node
ports dropped). Left out, and said so: objects a controller made (an owner reference), objects
already another Replicator's or Flotilla's copies, kube-root-ca.crt and the default ServiceAccount,
and Secrets: a Replicator's resources would hold their data in the clear, readable by whoever may
read Replicators (use ingressSecureEnabled for the Ingress's TLS, or copy Secrets yourself).

Writing it makes the namespace's objects the Replicator's (label flotilla.dev/replicator) so that
it keeps them in step in the primary too, and labels the namespace
flotilla.dev/replication-allowed=true (the opt-in a Replicator needs for a namespace it did not
create). Deleting the Replicator later deletes what it applied, these objects of the primary
included, so replicate writes only with --adopt, which says you accept that; remove the label
from an object later to keep it.`

const replicateExample = `  # See the Replicator it would make, without writing anything
  flotillactl replicate shop --to secondary1 --to secondary2 --dry-run=client -o yaml

  # Create it (or add secondary3 to the Replicator "shop" and whatever shop holds now)
  flotillactl replicate shop --to secondary1,secondary2 --adopt
  flotillactl replicate shop --to secondary3 --adopt

  # Every secondary, under another name
  flotillactl replicate shop --to '*' --name shop-everywhere`

func newReplicateCommand(primary func() (client.Client, error)) *cobra.Command {
	var o replicateOptions
	cmd := &cobra.Command{
		Use:     "replicate NAMESPACE --to CLUSTER...",
		Short:   "Create or extend a Replicator from what a namespace holds",
		Long:    replicateLong,
		Example: replicateExample,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("replicate takes one namespace, e.g. flotillactl replicate shop --to secondary1")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.namespace = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			c, err := primary()
			if err != nil {
				return err
			}
			return runReplicate(cmd.Context(), c, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringSliceVar(&o.to, "to", nil, "clusters to replicate to (repeat, or comma-separated): cluster, context or <cluster>.<user> names, or '*' for every secondary")
	cmd.Flags().StringVar(&o.name, "name", "", "the Replicator's name (default: the namespace's)")
	dryrun.AddFlag(cmd.Flags(), &o.dryRun, "write nothing, show what would be (with -o, the Replicator)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "print the Replicator: yaml or json")
	cmd.Flags().BoolVar(&o.adopt, "adopt", false, "accept that the namespace's objects become the Replicator's: deleting the Replicator then deletes them in the primary too (required to write)")
	return cmd
}

func (o *replicateOptions) validate() error {
	ns := o.namespace
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	if strings.HasPrefix(ns, "kube-") || ns == metav1.NamespaceDefault || ns == flotillav1.SystemNamespace {
		return fmt.Errorf("namespace %s cannot be replicated: a Replicator owns its namespace and may delete it (never default, %s or kube-*)",
			ns, flotillav1.SystemNamespace)
	}
	o.to = slices.DeleteFunc(o.to, func(s string) bool { return strings.TrimSpace(s) == "" })
	if len(o.to) == 0 {
		return errors.New("--to is required: the clusters to replicate to (flotillactl cluster list shows them)")
	}
	if slices.Contains(o.to, "*") && len(o.to) > 1 {
		return errors.New("--to '*' means every secondary and cannot be combined with names")
	}
	if o.name == "" {
		o.name = ns
	}
	if errs := validation.IsDNS1123Subdomain(o.name); len(errs) > 0 {
		return fmt.Errorf("--name %q: %s", o.name, strings.Join(errs, "; "))
	}
	switch o.output {
	case "", "yaml", "json":
	default:
		return fmt.Errorf("--output %q: want yaml or json", o.output)
	}
	return nil
}

// runReplicate reads the namespace, builds the Replicator and, unless a dry run, adopts the
// objects, opens the namespace and writes the Replicator.
func runReplicate(ctx context.Context, c client.Client, o replicateOptions, out, errOut io.Writer) error {
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: o.namespace}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s not found in the primary", o.namespace)
		}
		return fmt.Errorf("reading namespace %s: %w", o.namespace, err)
	}
	if err := knownClusters(ctx, c, o.to); err != nil {
		return err
	}
	objs, notes, err := namespaceObjects(ctx, c, o.namespace, o.name)
	if err != nil {
		return err
	}
	rep := &flotillav1.Replicator{}
	err = c.Get(ctx, client.ObjectKey{Name: o.name}, rep)
	existing := err == nil
	switch {
	case apierrors.IsNotFound(err):
		rep = &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: o.name}}
	case err != nil:
		return fmt.Errorf("reading Replicator %s: %w", o.name, err)
	}
	added, err := ExtendReplicator(rep, o.namespace, o.to, objs)
	if err != nil {
		return err
	}
	rep.APIVersion, rep.Kind = flotillav1.GroupVersion.String(), "Replicator"
	for _, n := range notes {
		_, _ = fmt.Fprintln(errOut, "skipped:", n)
	}
	dry := o.dryRun.On()
	verb := map[bool]string{false: "created", true: "configured"}[existing]
	if !dry && len(added) > 0 && !o.adopt {
		return fmt.Errorf("replicate would make %d object(s) of namespace %s Replicator %s's: deleting the Replicator would then delete them in the primary too; "+
			"run it again with --adopt to accept that, or with --dry-run=client -o yaml to see the Replicator (nothing was changed)", len(added), o.namespace, o.name)
	}
	switch o.dryRun {
	case dryrun.Server:
		// The API server checks the Replicator (the CRD's rules, the webhook's check of the
		// author's rights) and keeps nothing; nothing else is written.
		if err := checkReplicator(ctx, c, rep, existing); err != nil {
			return err
		}
	case dryrun.Client:
	default:
		if err := writeReplicator(ctx, c, rep, existing, &ns, added, errOut); err != nil {
			return err
		}
	}
	if o.output != "" {
		return printReplicator(out, rep, o.output)
	}
	suffix := ""
	if dry {
		suffix = " (" + string(o.dryRun) + " dry run)"
	}
	_, err = fmt.Fprintf(out, "replicator.flotilla.dev/%s %s%s: %d object(s) of %s added, targets %s\n",
		o.name, verb, suffix, len(added), o.namespace, strings.Join(rep.Spec.TargetCluster, ", "))
	return err
}

// writeReplicator has the API server check the Replicator (a server-side dry run: the CRD's rules,
// the webhook's check of the author's rights) before anything is labelled, then opens the
// namespace, adopts the objects taken and writes the Replicator.
func writeReplicator(ctx context.Context, c client.Client, rep *flotillav1.Replicator, existing bool, ns *corev1.Namespace,
	added []unstructured.Unstructured, errOut io.Writer) error {
	if err := checkReplicator(ctx, c, rep, existing); err != nil {
		return err
	}
	if err := openNamespace(ctx, c, ns, errOut); err != nil {
		return err
	}
	if err := adopt(ctx, c, ns.Name, rep.Name, added); err != nil {
		return err
	}
	var err error
	if existing {
		err = c.Update(ctx, rep)
	} else {
		err = c.Create(ctx, rep)
	}
	if err != nil {
		return fmt.Errorf("writing Replicator %s: %w", rep.Name, err)
	}
	return nil
}

// knownClusters refuses a --to name that is no registered cluster, when the primary's
// ClusterDetectors can be read.
func knownClusters(ctx context.Context, c client.Client, to []string) error {
	if slices.Equal(to, []string{"*"}) {
		return nil
	}
	var cds flotillav1.ClusterDetectorList
	if err := c.List(ctx, &cds, client.InNamespace(flotillav1.SystemNamespace)); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return errors.New("flotilla is not installed in the primary (no ClusterDetector API): helm install flotilla first")
		}
		return fmt.Errorf("listing the clusters (ClusterDetectors in %s): %w", flotillav1.SystemNamespace, err)
	}
	var unknown []string
	for _, name := range to {
		if !slices.ContainsFunc(cds.Items, func(cd flotillav1.ClusterDetector) bool {
			return cd.Name == name || cd.Spec.Context == name || cd.Spec.Cluster+"."+cd.Spec.User == name
		}) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown cluster(s) %s: flotillactl cluster list shows the registered ones", strings.Join(unknown, ", "))
	}
	return nil
}

// namespaceObjects lists what a Replicator may carry of a namespace, cleaned for its resources,
// and says what it leaves out (notes). replicator is the name of the Replicator it is for: its
// own objects are taken again.
func namespaceObjects(ctx context.Context, c client.Client, namespace, replicator string) ([]unstructured.Unstructured, []string, error) {
	var out []unstructured.Unstructured
	var notes []string
	for _, k := range flotillav1.ReplicatedKinds {
		if k.PrimaryOnly {
			continue // cert-manager's Certificates: the Replicator's tls.issuerRef makes its own
		}
		if k.WriteOnly {
			// Secrets: named only, their data is never read.
			secrets, err := secretNames(ctx, c, namespace)
			if err != nil {
				return nil, nil, err
			}
			for _, name := range secrets {
				notes = append(notes, fmt.Sprintf("%s %s: a Replicator's resources would hold its data in the clear, readable by whoever may read Replicators "+
					"(ingressSecureEnabled makes the Ingress's TLS Secrets)", k.Kind, name))
			}
			continue
		}
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(k.GroupVersionKind().GroupVersion().WithKind(k.Kind + "List"))
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			if meta.IsNoMatchError(err) {
				continue // an API the primary does not serve holds nothing
			}
			return nil, nil, fmt.Errorf("listing %s in %s: %w", k.Resource, namespace, err)
		}
		for _, u := range list.Items {
			if why := leftOut(&u, replicator); why != "" {
				if why != "-" {
					notes = append(notes, fmt.Sprintf("%s %s: %s", k.Kind, u.GetName(), why))
				}
				continue
			}
			out = append(out, CleanForReplicator(u))
		}
	}
	return out, notes, nil
}

// secretNames are the Secrets of a namespace a user made (not ServiceAccount tokens, not Helm's
// releases), read as metadata only.
func secretNames(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing secrets in %s: %w", namespace, err)
	}
	var out []string
	for _, s := range list.Items {
		if s.Annotations[corev1.ServiceAccountNameKey] != "" || s.Labels["owner"] == "helm" || len(s.OwnerReferences) > 0 {
			continue
		}
		out = append(out, s.Name)
	}
	return out, nil
}

// leftOut says why an object is not carried ("-": silently, "": it is).
func leftOut(u *unstructured.Unstructured, replicator string) string {
	labels, annotations := u.GetLabels(), u.GetAnnotations()
	switch {
	case len(u.GetOwnerReferences()) > 0:
		return "-" // made by a controller, which the Replicator carries instead
	case u.GetKind() == "ConfigMap" && u.GetName() == "kube-root-ca.crt", u.GetKind() == "ServiceAccount" && u.GetName() == "default":
		return "-"
	case labels[flotillav1.LabelReplicator] != "" && labels[flotillav1.LabelReplicator] != flotillav1.ReplicatorLabelValue(replicator):
		return "already carried by Replicator " + labels[flotillav1.LabelReplicator]
	case labels[flotillav1.LabelReplicator] == "" && (annotations[flotillav1.AnnotationOwner] != "" || labels[flotillav1.LabelPrimary] != ""):
		return "a copy Flotilla made"
	}
	return ""
}

// serverSet are metadata fields the API server sets; a manifest to apply carries none of them.
var serverSet = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "ownerReferences", "finalizers", "selfLink", "namespace", "generateName"}

// droppedAnnotations are annotations of tools, not of the object.
var droppedAnnotations = []string{"kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision"}

// CleanForReplicator is an object as a Replicator's resources carry it: no status, no field the
// API server sets, no Flotilla label or annotation, no kubectl bookkeeping; a Service without its
// cluster IPs, node ports and health-check node port, which each cluster allocates.
func CleanForReplicator(u unstructured.Unstructured) unstructured.Unstructured {
	o := u.DeepCopy()
	delete(o.Object, "status")
	for _, f := range serverSet {
		unstructured.RemoveNestedField(o.Object, "metadata", f)
	}
	for _, pair := range []struct {
		get func() map[string]string
		set func(map[string]string)
	}{{o.GetLabels, o.SetLabels}, {o.GetAnnotations, o.SetAnnotations}} {
		m := pair.get()
		for k := range m {
			if strings.HasPrefix(k, "flotilla.dev/") || slices.Contains(droppedAnnotations, k) {
				delete(m, k)
			}
		}
		pair.set(m)
	}
	if o.GetKind() == "Service" {
		for _, f := range []string{"clusterIP", "clusterIPs", "healthCheckNodePort"} {
			unstructured.RemoveNestedField(o.Object, "spec", f)
		}
		if ports, ok, _ := unstructured.NestedSlice(o.Object, "spec", "ports"); ok {
			for _, p := range ports {
				if pm, ok := p.(map[string]any); ok {
					delete(pm, "nodePort")
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, ports, "spec", "ports")
		}
	}
	return *o
}

// ExtendReplicator makes rep carry a namespace to more clusters: a new one (no
// replicationNamespace yet) gets it, the clusters and the objects; an existing one must be of that
// namespace, and gets the clusters it lacks (none beyond '*') and the objects it does not carry yet
// (by kind and name, plumber's fields included). It returns the objects added.
func ExtendReplicator(rep *flotillav1.Replicator, namespace string, to []string, objs []unstructured.Unstructured) ([]unstructured.Unstructured, error) {
	spec := &rep.Spec
	switch spec.ReplicationNamespace {
	case "":
		spec.ReplicationNamespace = namespace
	case namespace:
	default:
		return nil, fmt.Errorf("the Replicator %s replicates namespace %s, not %s: choose another --name", rep.Name, spec.ReplicationNamespace, namespace)
	}
	switch {
	case slices.Equal(spec.TargetCluster, []string{"*"}):
	case slices.Equal(to, []string{"*"}):
		spec.TargetCluster = []string{"*"}
	default:
		for _, t := range to {
			if !slices.Contains(spec.TargetCluster, t) {
				spec.TargetCluster = append(spec.TargetCluster, t)
			}
		}
	}
	carried := map[string]bool{"ConfigMap/" + spec.ConfigMapName: spec.ConfigMapName != "", "Deployment/" + spec.DeploymentName: spec.DeploymentName != "",
		"Service/" + spec.ServiceName: spec.ServiceName != "", "Ingress/" + spec.IngressName: spec.IngressName != ""}
	for _, m := range spec.Resources {
		carried[m.Kind+"/"+m.Metadata.Name] = true
	}
	var added []unstructured.Unstructured
	for _, u := range objs {
		if carried[u.GetKind()+"/"+u.GetName()] {
			continue
		}
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		var m flotillav1.Manifest
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		spec.Resources = append(spec.Resources, m)
		added = append(added, u)
	}
	if len(spec.Resources) > flotillav1.MaxResources {
		return nil, fmt.Errorf("namespace %s holds too much for one Replicator: %d resources, at most %d", namespace, len(spec.Resources), flotillav1.MaxResources)
	}
	return added, nil
}

// openNamespace labels the namespace flotilla.dev/replication-allowed=true, the opt-in a
// Replicator needs to write in a namespace it did not create.
func openNamespace(ctx context.Context, c client.Client, ns *corev1.Namespace, errOut io.Writer) error {
	if ns.Labels[flotillav1.LabelReplicationAllowed] == "true" {
		return nil
	}
	base := ns.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[flotillav1.LabelReplicationAllowed] = "true"
	if err := c.Patch(ctx, ns, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("labelling namespace %s %s=true (the Replicator's opt-in): %w", ns.Name, flotillav1.LabelReplicationAllowed, err)
	}
	_, err := fmt.Fprintf(errOut, "namespace/%s labelled %s=true\n", ns.Name, flotillav1.LabelReplicationAllowed)
	return err
}

// adopt labels the primary's objects as the Replicator's, so that it keeps them in step there
// instead of leaving them alone as a user's.
func adopt(ctx context.Context, c client.Client, namespace, replicator string, objs []unstructured.Unstructured) error {
	for _, u := range objs {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, flotillav1.LabelReplicator, flotillav1.ReplicatorLabelValue(replicator))
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		live.SetNamespace(namespace)
		live.SetName(u.GetName())
		if err := c.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("labelling %s %s as Replicator %s's: %w", u.GetKind(), u.GetName(), replicator, err)
		}
	}
	return nil
}

func printReplicator(out io.Writer, rep *flotillav1.Replicator, format string) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rep)
	if err != nil {
		return fmt.Errorf("encoding the Replicator: %w", err)
	}
	// What the API server keeps is not part of what a user applies.
	delete(obj, "status")
	for _, f := range []string{"creationTimestamp", "managedFields", "uid", "resourceVersion", "generation"} {
		unstructured.RemoveNestedField(obj, "metadata", f)
	}
	var raw []byte
	if format == "json" {
		raw, err = json.MarshalIndent(obj, "", "  ")
		raw = append(raw, '\n')
	} else {
		raw, err = yaml.Marshal(obj)
	}
	if err != nil {
		return fmt.Errorf("encoding the Replicator: %w", err)
	}
	_, err = out.Write(raw)
	return err
}

// checkReplicator has the API server check the Replicator as it would be written (a server-side
// dry run: the CRD's rules, the webhook's check of the author's rights), keeping nothing.
func checkReplicator(ctx context.Context, c client.Client, rep *flotillav1.Replicator, existing bool) error {
	obj := rep.DeepCopy() // the answer to a dry run is not what is written next
	var err error
	if existing {
		err = c.Update(ctx, obj, &client.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	} else {
		err = c.Create(ctx, obj, &client.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	}
	if err != nil {
		return fmt.Errorf("writing Replicator %s: %w", rep.Name, err)
	}
	return nil
}
