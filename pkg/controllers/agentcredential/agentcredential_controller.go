package agentcredential

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/flotilla-dev/flotilla/internal/clocks"
	"github.com/flotilla-dev/flotilla/internal/satoken"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

// Registry is what the reconciler reads of the cluster registry.
type Registry interface {
	Snapshot(name string) (clusters.Snapshot, bool)
	Secondary(name string) (clusters.Secondary, bool)
	ClusterSource(h handler.EventHandler) source.Source
}

var _ Registry = (*clusters.Registry)(nil)

// Reconciler gives each pulled secondary's agent a credential of the manager's, and a new one
// before it expires.
type Reconciler struct {
	Registry Registry
	// Tokens mints tokens of the agents' ServiceAccounts (the primary's flotilla-system).
	Tokens corev1client.ServiceAccountInterface
	// Primary deletes a bootstrap credential's Secret in the primary.
	Primary client.Client
	// Lifetime is the life of the tokens minted; Fraction of it passes before one is replaced.
	Lifetime time.Duration
	Fraction float64
	Recorder events.EventRecorder
	Clock    clock.PassiveClock

	mu sync.Mutex
	// written are the claims of the last credential written for each cluster.
	written map[string]satoken.Claims
}

// retry is when a cluster whose credential could not be written is looked at again.
const retry = 10 * time.Second

// Reconcile looks at one cluster's agent credential and replaces it when due.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	snap, ok := r.Registry.Snapshot(req.Name)
	if !ok || snap.Mode != clusters.ModePull || snap.Tunnel == nil || !snap.Tunnel.Connected {
		// Written only through the agent's session: its next connection is a change of the cluster.
		return ctrl.Result{}, nil
	}
	d := decide(clocks.Now(r.Clock), req.Name, snap.Tunnel.Credential, r.lastWritten(req.Name), r.Fraction)
	if !d.rotate {
		return ctrl.Result{RequeueAfter: d.after}, nil
	}
	sec, ok := r.Registry.Secondary(req.Name)
	if !ok || !sec.Running {
		return ctrl.Result{RequeueAfter: retry}, nil
	}
	claims, err := r.rotate(ctx, req.Name, sec.Client)
	if err != nil {
		r.event(req.Name, corev1.EventTypeWarning, flotillav1.ReasonAgentCredentialFailed, "Giving the agent of %s a new credential failed (%s): %v", req.Name, d.why, err)
		return ctrl.Result{RequeueAfter: retry}, nil
	}
	r.event(req.Name, corev1.EventTypeNormal, flotillav1.ReasonAgentCredentialRotated,
		"Gave the agent of %s a new credential, valid until %s: %s", req.Name, claims.Expires.UTC().Format(time.RFC3339), d.why)
	// The bootstrap credential ends with its Secret, now that the agent has one of the manager's.
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: tunnel.BootstrapSecretName(req.Name)}}
	if err := client.IgnoreNotFound(r.Primary.Delete(ctx, bootstrap)); err != nil {
		return ctrl.Result{}, fmt.Errorf("deleting the bootstrap Secret %s/%s: %w", bootstrap.Namespace, bootstrap.Name, err)
	}
	return ctrl.Result{RequeueAfter: claims.RenewAt(r.Fraction).Sub(clocks.Now(r.Clock))}, nil
}

// rotate mints a token of the cluster's agent ServiceAccount and writes it into the agent's
// Secret in the secondary, by a patch of that one key: the manager never reads that Secret.
func (r *Reconciler) rotate(ctx context.Context, cluster string, secondary client.Client) (satoken.Claims, error) {
	seconds := int64(r.Lifetime.Seconds())
	tr, err := r.Tokens.CreateToken(ctx, tunnel.AgentServiceAccountPrefix+cluster,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return satoken.Claims{}, fmt.Errorf("minting a token of %s/%s%s in the primary: %w", flotillav1.SystemNamespace, tunnel.AgentServiceAccountPrefix, cluster, err)
	}
	claims, err := satoken.Parse(tr.Status.Token)
	if err != nil {
		return satoken.Claims{}, fmt.Errorf("reading the minted token: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"data": map[string]string{"token": base64.StdEncoding.EncodeToString([]byte(tr.Status.Token))}})
	if err != nil {
		return satoken.Claims{}, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: flotillav1.AgentSecretName}}
	if err := secondary.Patch(ctx, secret, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return satoken.Claims{}, fmt.Errorf("writing %s/%s in %s: %w", secret.Namespace, secret.Name, cluster, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written == nil {
		r.written = map[string]satoken.Claims{}
	}
	r.written[cluster] = claims
	return claims, nil
}

func (r *Reconciler) lastWritten(cluster string) satoken.Claims {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written[cluster]
}

// event records an Event on the cluster's ClusterDetector (never the credential).
func (r *Reconciler) event(cluster, kind, reason, format string, args ...any) {
	if r.Recorder == nil {
		return
	}
	cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: cluster}}
	r.Recorder.Eventf(cd, nil, kind, reason, "AgentCredential", format, args...)
}
