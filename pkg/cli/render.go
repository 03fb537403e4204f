package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/overrides"
	"github.com/flotilla-dev/flotilla/pkg/replication"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

const renderLong = `render prints what Flotilla sends to one secondary for an object of the primary, after that
cluster's Overrides and ClusterOverrides, and names each rule that applied (also in the
flotilla.dev/overrides annotation of what it prints).

  pod NAMESPACE/NAME   an elected pod: its delegate in --cluster, as the manager builds it (the owner
                       reference to the primary's FlotillaPrimary there left out). A rule that cannot
                       apply is printed instead, as the pod's reason shows it.
  replicator NAME      a Replicator's copies in --cluster, in apply order, as the manager builds
                       them before it reads that cluster: where the live Deployment keeps another
                       selector, or an HPA scales it, those are kept there. Secrets' values are
                       never printed, nor are the TLS Secrets of ingressSecureEnabled.`

// newRenderCommand is flotillactl render.
func newRenderCommand(primary func() (client.Client, error)) *cobra.Command {
	render := &cobra.Command{
		Use:   "render",
		Short: "What Flotilla sends to a cluster for an object, after that cluster's Overrides",
		Long:  renderLong,
	}
	var cluster string
	pod := &cobra.Command{
		Use:     "pod NAMESPACE/NAME --cluster CLUSTER",
		Short:   "An elected pod's delegate in a secondary, after that cluster's Overrides",
		Long:    renderLong,
		Example: "  flotillactl render pod shop/web-7d9c-x2x --cluster eu-1",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || strings.Count(args[0], "/") != 1 || strings.HasPrefix(args[0], "/") || strings.HasSuffix(args[0], "/") {
				return errors.New("render pod takes one NAMESPACE/NAME, e.g. flotillactl render pod shop/web-0 --cluster eu-1")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cluster == "" {
				return errors.New("--cluster: the secondary to render for (flotillactl cluster list names them)")
			}
			ns, name, _ := strings.Cut(args[0], "/")
			c, err := primary()
			if err != nil {
				return err
			}
			return runRenderPod(cmd.Context(), c, ns, name, cluster, cmd.OutOrStdout())
		},
	}
	pod.Flags().StringVar(&cluster, "cluster", "", "the secondary to render for (required)")
	rep := &cobra.Command{
		Use:     "replicator NAME --cluster CLUSTER",
		Short:   "A Replicator's copies in a secondary, after that cluster's Overrides",
		Long:    renderLong,
		Example: "  flotillactl render replicator web --cluster eu-1",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || strings.Contains(args[0], "/") {
				return errors.New("render replicator takes one NAME (Replicators are cluster-scoped), e.g. flotillactl render replicator web --cluster eu-1")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cluster == "" {
				return errors.New("--cluster: the secondary to render for (flotillactl cluster list names them)")
			}
			c, err := primary()
			if err != nil {
				return err
			}
			return runRenderReplicator(cmd.Context(), c, args[0], cluster, cmd.OutOrStdout())
		},
	}
	rep.Flags().StringVar(&cluster, "cluster", "", "the secondary to render for (required)")
	render.AddCommand(pod, rep)
	return render
}

// runRenderReplicator prints what a Replicator applies in one secondary (replication.Desired, as
// the controller calls it), each object's Override rules named above it.
func runRenderReplicator(ctx context.Context, c client.Client, name, cluster string, out io.Writer) error {
	var rep flotillav1.Replicator
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &rep); err != nil {
		return fmt.Errorf("reading Replicator %s: %w", name, err)
	}
	primaryID, err := clusters.ClusterID(ctx, c)
	if err != nil {
		return fmt.Errorf("reading the primary's ID: %w", err)
	}
	sources, err := views.Overrides(ctx, c, rep.Spec.ReplicationNamespace)
	if err != nil {
		return err
	}
	target, err := views.OverrideCluster(ctx, c, cluster)
	if err != nil {
		return err
	}
	objs, err := replication.Desired(replication.Inputs{Replicator: &rep, PrimaryID: primaryID, Overrides: sources},
		replication.Place{Cluster: cluster, Overrides: target})
	if err != nil {
		return fmt.Errorf("for cluster %s, %w: nothing of Replicator %s is applied there until it is fixed", cluster, err, name)
	}
	if _, err := fmt.Fprintf(out, "# Replicator %s in cluster %s: %d object(s) in namespace %s\n", name, cluster, len(objs), rep.Spec.ReplicationNamespace); err != nil {
		return err
	}
	if rep.Spec.IngressSecureEnabled {
		if _, err := fmt.Fprintf(out, "# (and its TLS Secrets %s and %s, never printed)\n", replication.ServerSecretName, replication.ClientSecretName); err != nil {
			return err
		}
	}
	for _, o := range objs {
		redactSecret(o)
		raw, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		rules := o.GetAnnotations()[flotillav1.AnnotationOverrides]
		header := fmt.Sprintf("---\n# %s %s: no Override rule applies\n", o.GetKind(), o.GetName())
		if rules != "" {
			header = fmt.Sprintf("---\n# %s %s, changed by: %s\n", o.GetKind(), o.GetName(), rules)
		}
		if _, err := fmt.Fprint(out, header+string(raw)); err != nil {
			return err
		}
	}
	return nil
}

// redactSecret replaces a core Secret's values by their size: render never prints a credential.
func redactSecret(o *unstructured.Unstructured) {
	if o.GetAPIVersion() != "v1" || o.GetKind() != "Secret" {
		return
	}
	for _, field := range []string{"data", "stringData"} {
		values, found, _ := unstructured.NestedMap(o.Object, field)
		if !found {
			continue
		}
		for k, v := range values {
			values[k] = fmt.Sprintf("(%d characters, not printed)", len(fmt.Sprint(v)))
		}
		_ = unstructured.SetNestedMap(o.Object, values, field)
	}
}

func runRenderPod(ctx context.Context, c client.Client, ns, name, cluster string, out io.Writer) error {
	var proxy corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &proxy); err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	if proxy.Labels[flotillav1.LabelProxy] != "true" {
		return fmt.Errorf("pod %s/%s is not elected (no %s label): Flotilla sends nothing of it to a secondary", ns, name, flotillav1.LabelProxy)
	}
	primaryID, err := clusters.ClusterID(ctx, c)
	if err != nil {
		return fmt.Errorf("reading the primary's ID: %w", err)
	}
	delegate, err := translate.Delegate(&proxy, primaryID, metav1.OwnerReference{})
	if err != nil {
		return err
	}
	delegate.OwnerReferences = nil
	sources, err := views.Overrides(ctx, c, ns)
	if err != nil {
		return err
	}
	target, err := views.OverrideCluster(ctx, c, cluster)
	if err != nil {
		return err
	}
	rendered, applied, err := overrides.ApplyPod(delegate, overrides.PodSubject(&proxy), target, sources)
	if err != nil {
		return fmt.Errorf("for cluster %s, %w: nothing is sent there until it is fixed", cluster, err)
	}
	if len(applied) > 0 {
		if rendered.Annotations == nil {
			rendered.Annotations = map[string]string{}
		}
		rendered.Annotations[flotillav1.AnnotationOverrides] = overrides.Names(applied)
	}
	rendered.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	raw, err := yaml.Marshal(rendered)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("# The delegate of pod %s/%s in cluster %s", ns, name, cluster)
	if len(applied) == 0 {
		header += ": no Override rule applies.\n"
	} else {
		header += ", changed by:\n"
		for _, a := range applied {
			header += "#   " + a.String() + "\n"
		}
	}
	_, err = fmt.Fprint(out, header+string(raw))
	return err
}
