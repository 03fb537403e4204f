package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/placement"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// deviceClaims reads what an elected pod's device claims (DRA) request: the spec of each
// template, or of each claim it names, read live (the manager caches neither) at the pace of
// LiveReads; and, for a named claim, the cluster where the proxies that name it already are. A
// template or claim that does not exist is refused at admission, naming it: placement cannot
// judge where a claim it has not read fits.
func (h *Handler) deviceClaims(ctx context.Context, pod *corev1.Pod) (placement.DeviceClaims, error) {
	var out placement.DeviceClaims
	if len(pod.Spec.ResourceClaims) == 0 || h.LiveClaims == nil {
		return out, nil
	}
	out.Specs = map[string]resourcev1.ResourceClaimSpec{}
	for _, rc := range pod.Spec.ResourceClaims {
		switch {
		case rc.ResourceClaimTemplateName != nil:
			var t resourcev1.ResourceClaimTemplate
			if err := h.readLive(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: *rc.ResourceClaimTemplateName}, &t); err != nil {
				return out, deviceReadError(err, "ResourceClaimTemplate", pod.Namespace, *rc.ResourceClaimTemplateName, rc.Name)
			}
			out.Specs[rc.Name] = t.Spec.Spec
		case rc.ResourceClaimName != nil:
			var c resourcev1.ResourceClaim
			if err := h.readLive(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: *rc.ResourceClaimName}, &c); err != nil {
				return out, deviceReadError(err, "ResourceClaim", pod.Namespace, *rc.ResourceClaimName, rc.Name)
			}
			out.Specs[rc.Name] = c.Spec
			if out.Cluster == "" {
				cluster, err := h.sharedClaimCluster(ctx, pod.Namespace, *rc.ResourceClaimName)
				if err != nil {
					return out, err
				}
				out.Cluster, out.Shared = cluster, *rc.ResourceClaimName
			}
		}
	}
	return out, nil
}

func deviceReadError(err error, kind, namespace, name, claim string) error {
	if apierrors.IsNotFound(err) {
		return placement.Rejectf("flotilla cannot elect this pod: its claim %s names %s %s/%s, which does not exist: create it first", claim, kind, namespace, name)
	}
	return fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
}

// readLive reads an object from the API server at the pace of LiveReads.
func (h *Handler) readLive(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	if h.LiveReads != nil {
		wait, cancel := context.WithTimeout(ctx, liveReadWait)
		defer cancel()
		if h.LiveReads.Wait(wait) != nil {
			return errLiveReads
		}
	}
	return h.LiveClaims.Get(ctx, key, obj)
}

// sharedClaimCluster is the cluster of the first bound proxy (by name) of the namespace that
// names claim ("" for none): a claim is allocated in one cluster, where every pod that shares it
// must run.
func (h *Handler) sharedClaimCluster(ctx context.Context, namespace, claim string) (string, error) {
	if h.Proxies == nil {
		return "", nil
	}
	var pods corev1.PodList
	if err := h.Proxies.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{flotillav1.LabelProxy: "true"}); err != nil {
		return "", fmt.Errorf("listing the proxies of %s: %w", namespace, err)
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i := range pods.Items {
		p := &pods.Items[i]
		cluster, ok := flotillav1.ClusterOfNode(p.Spec.NodeName)
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		for _, rc := range translate.ProxyResourceClaims(p) {
			if rc.ResourceClaimName != nil && *rc.ResourceClaimName == claim {
				return cluster, nil
			}
		}
	}
	return "", nil
}
