package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters/views"
	"github.com/flotilla-dev/flotilla/pkg/election"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/tracing"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Path is where the pod mutation is served.
const Path = "/mutate-v1-pod"

// Handler serves admission requests for pods.
type Handler struct {
	// Views gathers the clusters as placement judges them.
	Views   *views.Gatherer
	Options election.Options
	Decoder admission.Decoder
	// Spread counts a controller's proxies per cluster, so that its replicas spread (nil: no
	// spreading, placement by free capacity alone).
	Spread *Spread
	// Namespaces reads the pod's namespace (its Pod Security labels): the manager's cache, with
	// LiveNamespaces (the API server) for a namespace the cache has not seen yet.
	Namespaces, LiveNamespaces client.Reader
	// Claims reads the claims an elected pod uses and the volumes they are bound to (the
	// manager's cache). Nil: none is read, and a pod with a claim is placed as if it were unbound.
	Claims client.Reader
	// LiveClaims reads, from the API server, a claim or volume the cache has not seen yet (a
	// StatefulSet's claim is created just before its pod), each name once per admission and at
	// the pace of LiveReads, which no other caller shares: a request naming hundreds of claims
	// costs the API server no more than LiveReads allows, and never the manager's Lease renewals
	// (nil: the cache alone).
	LiveClaims client.Reader
	LiveReads  *rate.Limiter
	// Proxies reads the namespace's proxies (the manager's cache): a pod that names a claim its
	// siblings already use goes to their cluster (nil: not read).
	Proxies client.Reader
	// Quotas reads the namespace's FleetQuotas (the manager's cache; nil: none is read). An
	// elected pod of a namespace that has one waits gated until the quota admits it.
	Quotas client.Reader
	// SealKey signs every proxy the webhook makes (flotilla.dev/seal): the proxy reconciler gives
	// a delegate only to a proxy whose seal it verifies. Without it no pod is elected.
	SealKey seal.Key
}

var _ admission.Handler = (*Handler)(nil)

// Handle mutates an elected pod into a proxy, or denies it with the reason.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := h.Decoder.Decode(req, pod); err != nil {
		decided(ctx, pod, OutcomeError, "")
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	// The PodGroup the pod names, where the placement reads it (the field is newer than the
	// types it was decoded with): from the pod, never from what the pod claims.
	if group := podGroupOf(req.Object.Raw); group != "" {
		metav1.SetMetaDataAnnotation(&pod.ObjectMeta, flotillav1.AnnotationPodGroup, group)
	} else {
		delete(pod.Annotations, flotillav1.AnnotationPodGroup)
	}
	out, err := h.mutate(ctx, pod, ptr.Deref(req.DryRun, false))
	var rej *placement.Rejection
	switch {
	case errors.Is(err, errLiveReads):
		decided(ctx, pod, OutcomeError, "")
		return admission.Errored(http.StatusTooManyRequests, err)
	case errors.As(err, &rej):
		log.FromContext(ctx).Info("Elected pod refused", "namespace", req.Namespace, "name", pod.GetName()+pod.GetGenerateName(), "reason", rej.Message)
		decided(ctx, pod, OutcomeDenied, "")
		return admission.Denied(rej.Message)
	case err != nil:
		decided(ctx, pod, OutcomeError, "")
		return admission.Errored(http.StatusInternalServerError, err)
	case out == pod:
		decided(ctx, pod, OutcomeSkipped, "")
		return admission.Allowed("not elected")
	}
	raw, err := json.Marshal(out)
	if err != nil {
		decided(ctx, pod, OutcomeError, "")
		return admission.Errored(http.StatusInternalServerError, err)
	}
	outcome, cluster := admittedOutcome(out)
	decided(ctx, pod, outcome, cluster)
	resp := admission.PatchResponseFromRaw(req.Object.Raw, raw)
	if !slices.ContainsFunc(resp.Patches, func(op jsonpatch.Operation) bool { return op.Operation == "remove" }) {
		return resp
	}
	// A removal may be of a field newer than the types the pod was decoded with: only then (the
	// webhook rarely removes anything itself) is the request's object decoded again to tell.
	decoded, err := decodedJSON(h.Decoder, req)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if resp.Patches = keepNewerFields(decoded, resp.Patches); len(resp.Patches) == 0 {
		resp.PatchType = nil
	}
	return resp
}

// decodedJSON is the request's pod as the webhook's types decode it, as JSON: what it knows of it.
func decodedJSON(dec admission.Decoder, req admission.Request) ([]byte, error) {
	pod := &corev1.Pod{}
	if err := dec.Decode(req, pod); err != nil {
		return nil, err
	}
	return json.Marshal(pod)
}

// mutate reads the pod's namespace and admits the pod (Admit); a dry run changes nothing of the
// webhook's state.
func (h *Handler) mutate(ctx context.Context, pod *corev1.Pod, dryRun bool) (*corev1.Pod, error) {
	if !election.Elected(pod, h.Options) {
		return pod, nil
	}
	labels, err := h.namespaceLabels(ctx, pod.Namespace)
	if err != nil {
		return nil, err
	}
	views, err := h.Views.ForNamespace(ctx, pod.Namespace)
	if err != nil {
		return nil, err
	}
	if len(h.SealKey) == 0 {
		return nil, errors.New("the webhook has no admission seal key")
	}
	claims, err := h.claimViews(ctx, pod)
	if err != nil {
		return nil, err
	}
	opts := h.Options
	if opts.QuotaGate, err = h.quotaGated(ctx, pod.Namespace); err != nil {
		return nil, err
	}
	if opts.Devices, err = h.deviceClaims(ctx, pod); err != nil {
		return nil, err
	}
	out, err := h.Spread.Place(ctx, pod, views, dryRun, func(views []placement.ClusterView) (*corev1.Pod, error) {
		return election.Admit(ctx, pod, labels, views, claims, opts)
	})
	if err != nil || out == pod {
		return out, err
	}
	// The trace this admission is part of goes on with the proxy's every later step; a value the
	// pod arrived with is not the webhook's and is dropped.
	delete(out.Annotations, flotillav1.AnnotationTraceparent)
	if tp := tracing.Inject(ctx); tp != "" {
		out.Annotations[flotillav1.AnnotationTraceparent] = tp
	}
	// Last: the seal covers everything the webhook set, Spread's annotation included.
	out.Annotations[flotillav1.AnnotationSeal] = seal.Stamp(h.SealKey, out)
	return out, nil
}

// quotaGated says whether the namespace has a FleetQuota. A primary that does not serve
// FleetQuotas (their CRD not installed) has none.
func (h *Handler) quotaGated(ctx context.Context, namespace string) (bool, error) {
	if h.Quotas == nil {
		return false, nil
	}
	var quotas flotillav1.FleetQuotaList
	switch err := h.Quotas.List(ctx, &quotas, client.InNamespace(namespace)); {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("listing the FleetQuotas of %s: %w", namespace, err)
	}
	return len(quotas.Items) > 0, nil
}

func (h *Handler) namespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	if h.Namespaces == nil {
		return nil, nil
	}
	var ns corev1.Namespace
	err := h.Namespaces.Get(ctx, client.ObjectKey{Name: name}, &ns)
	if apierrors.IsNotFound(err) && h.LiveNamespaces != nil {
		err = h.LiveNamespaces.Get(ctx, client.ObjectKey{Name: name}, &ns)
	}
	if err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns.Labels, nil
}

// liveReadWait bounds how long an admission waits for its turn at a live read: the API server
// gives the webhook 5 s in all.
const liveReadWait = time.Second

// errLiveReads is an admission that would read more, live, than LiveReads allows now.
var errLiveReads = errors.New("too many claims not yet in the manager's cache are being read: try again")

// claimViews reads each claim the pod's volumes use (each name once), and the cluster of the
// volume it is bound to: from the cache, and live (LiveClaims) only what the cache lacks.
func (h *Handler) claimViews(ctx context.Context, pod *corev1.Pod) (map[string]placement.ClaimView, error) {
	names := slices.Compact(slices.Sorted(slices.Values(translate.Claims(&pod.Spec))))
	if h.Claims == nil || len(names) == 0 {
		return nil, nil
	}
	out := map[string]placement.ClaimView{}
	for _, name := range names {
		var pvc corev1.PersistentVolumeClaim
		err := h.read(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, &pvc)
		if apierrors.IsNotFound(err) {
			out[name] = placement.ClaimView{}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading claim %s: %w", name, err)
		}
		v := placement.ClaimView{Found: true, Class: ptr.Deref(pvc.Spec.StorageClassName, "")}
		if pvc.Spec.VolumeName != "" {
			var pv corev1.PersistentVolume
			err := h.read(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("reading volume %s of claim %s: %w", pvc.Spec.VolumeName, name, err)
			}
			v.Cluster = pv.Annotations[flotillav1.AnnotationVolumeCluster]
		}
		// Bound by Flotilla before the volume controller's own write reached the volume.
		if v.Cluster == "" {
			v.Cluster = pvc.Annotations[flotillav1.AnnotationVolumeCluster]
		}
		out[name] = v
	}
	return out, nil
}

// read gets a claim or volume from the cache and, when the cache has not seen it, live, at the
// pace of LiveReads.
func (h *Handler) read(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := h.Claims.Get(ctx, key, obj)
	if !apierrors.IsNotFound(err) || h.LiveClaims == nil {
		return err
	}
	return h.readLive(ctx, key, obj)
}

// decided records one answer of Handle: counted in flotilla_webhook_decisions_total and, when
// the admission is traced, named on its span with the pod.
func decided(ctx context.Context, pod *corev1.Pod, outcome, cluster string) {
	countDecision(outcome, cluster)
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(tracing.KeyNamespace.String(pod.Namespace), tracing.KeyPod.String(cmp.Or(pod.Name, pod.GenerateName)),
		tracing.KeyOutcome.String(outcome))
	if cluster != "" {
		span.SetAttributes(tracing.KeyCluster.String(cluster))
	}
}
