package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

// AgentSecretName is the Secret in a pulled secondary's flotilla-system that gives its agent the
// tunnel endpoint's CA (ca.crt) and its credential in the primary (token): the chart's
// agent.secretName.
const AgentSecretName = "flotilla-agent"

// setMode records in the registration whether join registered the cluster in pull mode: joining
// without --pull makes it dialled again.
func setMode(r *clusters.Registration, name string, pull bool) {
	if r.Modes == nil {
		r.Modes = map[string]string{}
	}
	delete(r.Modes, name)
	if pull {
		r.Modes[name] = clusters.ModePull
	}
}

// joinPulled gives a secondary joined with --pull (nothing otherwise) what its agent needs: the ServiceAccount
// flotilla-system/flotilla-agent-<name> in the primary (no role: its token only proves the
// cluster to the tunnel endpoint), a token of it, and both with the endpoint's CA in the
// secondary's Secret flotilla-agent, written with the context's own credentials.
func joinPulled(ctx context.Context, primary, secondary client.Client, contextName, name string, o pullOptions, out io.Writer) error {
	if !o.enabled {
		return nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: tunnel.AgentServiceAccountPrefix + name,
		Labels: map[string]string{flotillav1.LabelCluster: name}}}
	if err := apply(ctx, primary, sa); err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	seconds := int64(o.tokenDuration.Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if err := primary.SubResource("token").Create(ctx, sa, tr); err != nil {
		return fmt.Errorf("minting the agent's token (%s/%s in the primary): %w", sa.Namespace, sa.Name, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: AgentSecretName},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"ca.crt": o.ca, "token": []byte(tr.Status.Token)}}
	if err := apply(ctx, secondary, secret); err != nil {
		return fmt.Errorf("context %s: %w", contextName, err)
	}
	_, err := fmt.Fprintf(out, "Pull mode: the manager reaches %s only through its agent's tunnel to %s. The agent's credential "+
		"(%s/%s in the primary) is in %s/%s of context %s and expires %s; join again before then.\n"+
		"Start the agent there with the chart: helm upgrade flotilla charts/flotilla -n %s --reuse-values "+
		"--set agent.enabled=true --set agent.cluster=%s --set agent.tunnelAddress=%s\n",
		name, o.address, sa.Namespace, sa.Name, secret.Namespace, secret.Name, contextName,
		tr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339), flotillav1.SystemNamespace, name, o.address)
	return err
}
