package agentcredential

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/flotilla-dev/flotilla/internal/satoken"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

// fakeRegistry is one pulled cluster, edge, whose agent is connected with presented.
type fakeRegistry struct {
	presented satoken.Claims
	secondary client.Client
}

func (f *fakeRegistry) Snapshot(name string) (clusters.Snapshot, bool) {
	if name != "edge" {
		return clusters.Snapshot{}, false
	}
	return clusters.Snapshot{Name: name, Mode: clusters.ModePull, Tunnel: &tunnel.Status{Connected: true, Credential: f.presented}}, true
}

func (f *fakeRegistry) Secondary(name string) (clusters.Secondary, bool) {
	return clusters.Secondary{Name: name, Client: f.secondary, Running: true}, name == "edge"
}

func (f *fakeRegistry) ClusterSource(handler.EventHandler) source.Source { return nil }

// token is a JWT with the claims the API server would write.
func token(iat time.Time, life time.Duration, bound string) string {
	claims := map[string]any{"iat": iat.Unix(), "exp": iat.Add(life).Unix(), "sub": "system:serviceaccount:flotilla-system:flotilla-agent-edge"}
	if bound != "" {
		claims["kubernetes.io"] = map[string]any{"secret": map[string]string{"name": bound}}
	}
	raw, _ := json.Marshal(claims)
	return "e30." + base64.RawURLEncoding.EncodeToString(raw) + ".c2ln"
}

func TestReconcileReplacesTheBootstrapCredentialThenRenewsIt(t *testing.T) {
	now := time.Date(2031, 3, 1, 8, 0, 0, 0, time.UTC) // not today: the reconciler reads its clock only
	clock := clocktesting.NewFakePassiveClock(now)
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: flotillav1.AgentSecretName},
		Data: map[string][]byte{"ca.crt": []byte("CA"), "token": []byte("join's")}}
	secondary := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build()
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: tunnel.BootstrapSecretName("edge")}}
	primary := fake.NewClientBuilder().WithScheme(scheme).WithObjects(bootstrap).Build()
	mints := 0
	tokens := k8sfake.NewClientset()
	tokens.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := ca.GetObject().(*authenticationv1.TokenRequest)
		mints++
		tr.Status.Token = token(clock.Now(), time.Duration(*tr.Spec.ExpirationSeconds)*time.Second, "")
		return true, tr, nil
	})
	reg := &fakeRegistry{presented: satoken.Claims{IssuedAt: now.Add(-time.Minute), Expires: now.Add(59 * time.Minute), BoundSecret: tunnel.BootstrapSecretName("edge")}, secondary: secondary}
	r := &Reconciler{Registry: reg, Tokens: tokens.CoreV1().ServiceAccounts(flotillav1.SystemNamespace), Primary: primary,
		Lifetime: 24 * time.Hour, Fraction: 0.5, Clock: clock}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: "edge"}}
	ctx := t.Context()

	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if mints != 1 {
		t.Fatalf("%d tokens minted for a bootstrap credential, want 1", mints)
	}
	var got corev1.Secret
	if err := secondary.Get(ctx, client.ObjectKeyFromObject(secret), &got); err != nil {
		t.Fatal(err)
	}
	written, err := satoken.Parse(string(got.Data["token"]))
	if err != nil || written.Expires.Sub(written.IssuedAt) != 24*time.Hour || string(got.Data["ca.crt"]) != "CA" {
		t.Errorf("the agent's Secret: token %+v (%v), ca.crt %q", written, err, got.Data["ca.crt"])
	}
	if err := primary.Get(ctx, client.ObjectKeyFromObject(bootstrap), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the bootstrap Secret is still there: %v", err)
	}
	if res.RequeueAfter <= 11*time.Hour || res.RequeueAfter > 12*time.Hour {
		t.Errorf("looked at again after %s, want about 12h (half of 24h)", res.RequeueAfter)
	}

	// The agent still presents the bootstrap credential (it reads the new one at its next
	// connection): the one written counts, nothing is minted again.
	if _, err := r.Reconcile(ctx, req); err != nil || mints != 1 {
		t.Fatalf("a second look minted %d tokens in all (%v), want still 1", mints, err)
	}
	// Past half of the written one's life: a new one.
	clock.SetTime(now.Add(12*time.Hour + time.Minute))
	if _, err := r.Reconcile(ctx, req); err != nil || mints != 2 {
		t.Fatalf("past half its life: %d tokens minted in all (%v), want 2", mints, err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "elsewhere"}}); err != nil || mints != 2 {
		t.Errorf("a cluster not pulled: %d tokens in all (%v)", mints, fmt.Sprint(err))
	}
}
