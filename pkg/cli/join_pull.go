package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/tunnel"
)

// AgentSecretName is the Secret in a pulled secondary's flotilla-system that gives its agent the
// tunnel endpoint's CA (ca.crt) and its credential in the primary (token): the chart's
// agent.secretName.
const AgentSecretName = flotillav1.AgentSecretName

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

// joinPulled gives a secondary joined with --pull what its agent needs: the ServiceAccount
// flotilla-system/flotilla-agent-<name> in the primary (no role: its tokens only prove the cluster
// to the tunnel endpoint), a bootstrap token of it bound to the primary's Secret
// flotilla-agent-bootstrap-<name> (the manager deletes that Secret once it has given the agent a
// credential of its own, which ends the bootstrap token), and both with the endpoint's CA in the
// secondary's Secret flotilla-agent, labelled for this primary, written with the context's own
// credentials. Joined without --pull, the rights pull mode granted in the secondary go.
func joinPulled(ctx context.Context, primary, secondary client.Client, contextName, name string, names access.Names, o pullOptions, out io.Writer) error {
	if !o.enabled {
		return removeAgentAccess(ctx, secondary, names)
	}
	labels := map[string]string{flotillav1.LabelCluster: name}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: tunnel.AgentServiceAccountPrefix + name, Labels: labels}}
	if err := apply(ctx, primary, sa); err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	// A new bootstrap Secret for every join: deleting the old one ends an earlier join's token.
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: tunnel.BootstrapSecretName(name)}}
	if err := primary.Delete(ctx, bootstrap); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("primary: deleting the earlier bootstrap Secret %s: %w", bootstrap.Name, err)
	}
	bootstrap = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: tunnel.BootstrapSecretName(name), Labels: labels},
		Type: corev1.SecretTypeOpaque}
	if err := createFresh(ctx, primary, bootstrap); err != nil {
		return fmt.Errorf("primary: creating the bootstrap Secret %s: %w", bootstrap.Name, err)
	}
	seconds := int64(o.tokenDuration.Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: bootstrap.Name, UID: bootstrap.UID}}}
	if err := primary.SubResource("token").Create(ctx, sa, tr); err != nil {
		return fmt.Errorf("minting the agent's bootstrap token (%s/%s in the primary): %w", sa.Namespace, sa.Name, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: AgentSecretName,
		Labels: map[string]string{"app.kubernetes.io/part-of": "flotilla", flotillav1.LabelPrimary: names.PrimaryID}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"ca.crt": o.ca, "token": []byte(tr.Status.Token)}}
	if err := apply(ctx, secondary, secret); err != nil {
		return fmt.Errorf("context %s: %w", contextName, err)
	}
	_, err := fmt.Fprintf(out, "Pull mode: the manager reaches %s only through its agent's tunnel to %s. The agent's bootstrap credential "+
		"(%s/%s in the primary) is in %s/%s of context %s and expires %s: the agent must connect before then, and the manager "+
		"then gives it a credential of its own, renewed before it expires.\n"+
		"Start the agent there with the chart: helm upgrade flotilla charts/flotilla -n %s --reuse-values "+
		"--set agent.enabled=true --set agent.cluster=%s --set agent.tunnelAddress=%s\n",
		name, o.address, sa.Namespace, sa.Name, secret.Namespace, secret.Name, contextName,
		tr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339), flotillav1.SystemNamespace, name, o.address)
	return err
}

// createFresh creates obj, waiting out the deletion of an earlier object of its name.
func createFresh(ctx context.Context, c client.Client, obj client.Object) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Create(ctx, obj)
		if !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// removeAgentAccess deletes the rights pull mode granted in the secondary (the agent's Role and
// RoleBinding), when they are this primary's.
func removeAgentAccess(ctx context.Context, secondary client.Client, names access.Names) error {
	return removeOurs(ctx, secondary, names, access.AgentObjects(names))
}

// removeOurs deletes those of objs the secondary holds that carry this primary's label; the
// others (not there, or not ours) are left.
func removeOurs(ctx context.Context, secondary client.Client, names access.Names, objs []client.Object) error {
	for _, obj := range objs {
		key := client.ObjectKeyFromObject(obj)
		switch err := secondary.Get(ctx, key, obj); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("reading %T %s: %w", obj, key, err)
		case obj.GetLabels()[flotillav1.LabelPrimary] != names.PrimaryID:
			continue
		}
		if err := secondary.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %T %s: %w", obj, key, err)
		}
	}
	return nil
}
