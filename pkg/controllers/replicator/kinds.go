package replicator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/replication"
	"github.com/flotilla-dev/flotilla/pkg/ssa"
)

// KindProblem is why a kind of a Replicator's resources cannot be written in one cluster: it is
// not served there, is not namespaced there, or the identity writing there may not write it.
// Reason is the Synced condition's reason.
type KindProblem struct {
	Reason, Message string
}

func (p *KindProblem) Error() string { return p.Message }

// kindDefinition is the kind of a CustomResourceDefinition.
var kindDefinition = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// kindIn is how a cluster serves the kind of an object to apply: its entry of
// flotillav1.ReplicatedKinds, or a plain kind of the resource the cluster's API maps it to; a
// *KindProblem when the cluster does not serve it, or serves it cluster-scoped.
func kindIn(mapper meta.RESTMapper, o *unstructured.Unstructured, cluster string, primary bool) (flotillav1.ReplicatedKind, error) {
	gvk := o.GroupVersionKind()
	if k, ok := flotillav1.SpecialKind(gvk.GroupKind()); ok {
		return k, nil
	}
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		msg := fmt.Sprintf("kind %s (%s) is not served in %s: its CustomResourceDefinition is not installed there", gvk.Kind, gvk.GroupVersion(), cluster)
		if !primary {
			msg += "; install it there, or set replicateCRDs to copy the primary's (where the cluster's admin allowed it: flotillactl cluster join --kinds ... --crds)"
		}
		return flotillav1.ReplicatedKind{}, &KindProblem{Reason: flotillav1.ReasonKindMissing, Message: msg}
	case err != nil:
		return flotillav1.ReplicatedKind{}, fmt.Errorf("finding the API of kind %s (%s) in %s: %w", gvk.Kind, gvk.GroupVersion(), cluster, err)
	case m.Scope.Name() != meta.RESTScopeNameNamespace:
		return flotillav1.ReplicatedKind{}, &KindProblem{Reason: flotillav1.ReasonKindNotAllowed,
			Message: fmt.Sprintf("kind %s (%s) is cluster-scoped in %s: a Replicator's resources are objects of its replication namespace", gvk.Kind, gvk.GroupVersion(), cluster)}
	}
	return flotillav1.KindFor(gvk, m.Resource.Resource, true), nil
}

// notAllowed turns an authorization refusal (RBAC's "cannot <verb> resource", not an admission
// policy's) of a write of a kind into a *KindProblem saying who allows it; other errors are
// returned as they are.
func notAllowed(err error, k flotillav1.ReplicatedKind, cluster string, primary bool) error {
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), " cannot ") {
		return err
	}
	res := k.GroupResource().String()
	if primary {
		return &KindProblem{Reason: flotillav1.ReasonKindNotAllowed,
			Message: fmt.Sprintf("the manager may not write %s in the primary: add it to the chart's replicator.kinds", res)}
	}
	return &KindProblem{Reason: flotillav1.ReasonKindNotAllowed,
		Message: fmt.Sprintf("this primary may not write %s in %s: an admin of that cluster allows it with flotillactl cluster join --kinds %s", res, cluster, res)}
}

// definitionReady bounds how long a pass waits for a definition it just applied to be served.
const definitionReady = 10 * time.Second

// replicateDefinitions applies, in a secondary, the primary's CustomResourceDefinition of each
// custom kind among objs (those the primary serves from a definition; built-in and aggregated
// kinds have none) and waits, bounded, until it is established there. A definition the secondary
// has that is not this primary's (its own, or another primary's) is left alone. A definition is
// never deleted by Flotilla. It returns what it applied, and the first problem.
func (r *Reconciler) replicateDefinitions(ctx context.Context, in replication.Inputs, cluster string, w client.Client, objs []*unstructured.Unstructured) ([]flotillav1.AppliedResource, error) {
	var out []flotillav1.AppliedResource
	seen := map[schema.GroupKind]bool{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if _, special := flotillav1.SpecialKind(gvk.GroupKind()); special || gvk.Group == "" || seen[gvk.GroupKind()] {
			continue
		}
		seen[gvk.GroupKind()] = true
		m, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return out, fmt.Errorf("finding the API of kind %s in the primary: %w", gvk.Kind, err)
		}
		name := m.Resource.Resource + "." + gvk.Group
		var def apiextensionsv1.CustomResourceDefinition
		if err := r.Live.Get(ctx, client.ObjectKey{Name: name}, &def); apierrors.IsNotFound(err) {
			continue // served without a definition (built in, or an aggregated API)
		} else if err != nil {
			return out, fmt.Errorf("reading CustomResourceDefinition %s in the primary: %w", name, err)
		}
		applied, err := r.applyDefinition(ctx, in, cluster, w, &def)
		if err != nil {
			return out, err
		}
		if applied {
			out = append(out, flotillav1.AppliedResource{Cluster: cluster, APIVersion: kindDefinition.GroupVersion().String(),
				Kind: kindDefinition.Kind, Name: name, ApplyStatus: flotillav1.ApplyStatusOK})
		}
	}
	return out, nil
}

// applyDefinition applies one definition in a secondary, unless one there is not this primary's
// (applied false), and waits until it is established.
func (r *Reconciler) applyDefinition(ctx context.Context, in replication.Inputs, cluster string, w client.Client, def *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	if def.Spec.Conversion != nil && def.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		return false, &KindProblem{Reason: flotillav1.ReasonKindMissing, Message: fmt.Sprintf(
			"CustomResourceDefinition %s converts its versions with a webhook of the primary, which %s cannot call: install it in %s with its own", def.Name, cluster, cluster)}
	}
	var live apiextensionsv1.CustomResourceDefinition
	err := w.Get(ctx, client.ObjectKey{Name: def.Name}, &live)
	switch {
	case apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err) && servedIn(w.RESTMapper(), def):
		return false, nil // not ours to write there, and the cluster serves the kind: its admin keeps the definition
	case err != nil:
		return false, definitionRefused(fmt.Errorf("reading it: %w", err), def.Name, cluster)
	case live.Labels[flotillav1.LabelPrimary] != in.PrimaryID:
		return false, nil // the cluster's own: left alone
	}
	desired := DefinitionCopy(def, in.PrimaryID)
	if err == nil && established(&live) && equality.Semantic.DeepEqual(live.Spec, desired.Spec) {
		return true, nil // as the primary's, and served: nothing to write or wait for at each pass
	}
	if _, err := ssa.Apply(ctx, w, desired, flotillav1.FieldManagerReplicator); err != nil {
		return false, definitionRefused(err, def.Name, cluster)
	}
	// Its objects can be applied once the API server serves the kind.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, definitionReady, true, func(ctx context.Context) (bool, error) {
		if err := w.Get(ctx, client.ObjectKey{Name: def.Name}, &live); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return established(&live), nil
	})
	if err != nil {
		return true, fmt.Errorf("CustomResourceDefinition %s applied in %s, not yet established: %w", def.Name, cluster, err)
	}
	return true, nil
}

// servedIn says whether a cluster serves the kind of a definition (its storage version).
func servedIn(mapper meta.RESTMapper, def *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range def.Spec.Versions {
		if v.Storage {
			_, err := mapper.RESTMapping(schema.GroupKind{Group: def.Spec.Group, Kind: def.Spec.Names.Kind}, v.Name)
			return err == nil
		}
	}
	return false
}

// established says whether the API server serves a definition's kind.
func established(def *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range def.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// definitionRefused says why a definition could not be applied, naming the join option that
// allows it when the identity may not write it.
func definitionRefused(err error, name, cluster string) error {
	if apierrors.IsForbidden(err) {
		return &KindProblem{Reason: flotillav1.ReasonKindNotAllowed, Message: fmt.Sprintf(
			"this primary may not write CustomResourceDefinition %s in %s: an admin of that cluster allows it with flotillactl cluster join --kinds %s --crds (%v)", name, cluster, name, err)}
	}
	return fmt.Errorf("applying CustomResourceDefinition %s in %s: %w", name, cluster, err)
}

// DefinitionCopy is what a secondary gets of a primary's CustomResourceDefinition: its name,
// labels, annotations (kubectl's last-applied aside) and spec, labelled as this primary's.
func DefinitionCopy(def *apiextensionsv1.CustomResourceDefinition, primaryID string) *apiextensionsv1.CustomResourceDefinition {
	out := &apiextensionsv1.CustomResourceDefinition{}
	out.SetGroupVersionKind(kindDefinition)
	out.Name = def.Name
	out.Labels = map[string]string{}
	for k, v := range def.Labels {
		out.Labels[k] = v
	}
	out.Labels[flotillav1.LabelPrimary] = primaryID
	for k, v := range def.Annotations {
		if k == "kubectl.kubernetes.io/last-applied-configuration" {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	out.Spec = *def.Spec.DeepCopy()
	return out
}

// kindProblemOf is the reason of a *KindProblem among errs, "" when none.
func kindProblemOf(err error) string {
	var p *KindProblem
	if errors.As(err, &p) {
		return p.Reason
	}
	return ""
}
