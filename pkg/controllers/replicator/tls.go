package replicator

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/pki"
	"github.com/flotilla-dev/flotilla/pkg/replication"
)

// caSecretKey is where a Replicator's CA (and its private key) lives: the primary only.
func caSecretKey(rep *flotillav1.Replicator) client.ObjectKey {
	return client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.ReplicatorCASecretName(rep.Name)}
}

// tlsMaterial returns the data of ca-secret and cli-secret, from cert-manager when the Replicator
// names an issuer, else from Flotilla's own CA.
func (r *Reconciler) tlsMaterial(ctx context.Context, in replication.Inputs) (server, cli map[string][]byte, applied []flotillav1.AppliedResource, err error) {
	rep := in.Replicator
	if rep.Spec.TLS != nil && rep.Spec.TLS.IssuerRef != nil {
		return r.certManagerMaterial(ctx, in)
	}
	server, cli, err = r.ownCAMaterial(ctx, rep)
	return server, cli, nil, err
}

// ownCAMaterial: ONE CA per Replicator for every cluster, kept in the primary's flotilla-system;
// a server certificate for every Ingress host; a client certificate. What is stored and still good
// is kept; the rest is (re)issued.
func (r *Reconciler) ownCAMaterial(ctx context.Context, rep *flotillav1.Replicator) (server, cli map[string][]byte, err error) {
	ns := rep.Spec.ReplicationNamespace
	caData, err := r.secretData(ctx, caSecretKey(rep))
	if err != nil {
		return nil, nil, err
	}
	serverData, err := r.secretData(ctx, client.ObjectKey{Namespace: ns, Name: replication.ServerSecretName})
	if err != nil {
		return nil, nil, err
	}
	clientData, err := r.secretData(ctx, client.ObjectKey{Namespace: ns, Name: replication.ClientSecretName})
	if err != nil {
		return nil, nil, err
	}
	bundle, _, err := pki.EnsureBundle(pki.StoredFrom(caData, serverData, clientData),
		pki.BundleSpec{CACommonName: rep.Name + "-ca", ClientCommonName: rep.Name + "-client", Hosts: replication.Hosts(rep)}, r.now())
	if err != nil {
		return nil, nil, fmt.Errorf("TLS material of Replicator %s: %w", rep.Name, err)
	}
	if err := r.storeCA(ctx, rep, bundle.CASecretData()); err != nil {
		return nil, nil, err
	}
	return bundle.ServerSecretData(), bundle.ClientSecretData(), nil
}

// secretData reads a Secret of the primary (uncached); nil when it does not exist.
func (r *Reconciler) secretData(ctx context.Context, key client.ObjectKey) (map[string][]byte, error) {
	var s corev1.Secret
	if err := r.Live.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	return s.Data, nil
}

// storeCA applies the CA Secret (server-side apply: a no-op when unchanged).
func (r *Reconciler) storeCA(ctx context.Context, rep *flotillav1.Replicator, data map[string][]byte) error {
	key := caSecretKey(rep)
	s := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels:      map[string]string{flotillav1.LabelReplicator: flotillav1.ReplicatorLabelValue(rep.Name)},
			Annotations: map[string]string{flotillav1.AnnotationOwner: flotillav1.OwnerReplicatorPrefix + rep.Name}},
		Type: corev1.SecretTypeOpaque, Data: data}
	if err := r.Client.Patch(ctx, s, client.Apply, client.FieldOwner(flotillav1.FieldManagerReplicator), client.ForceOwnership); err != nil { //nolint:staticcheck // typed apply of a core object
		return fmt.Errorf("storing the CA of Replicator %s: %w", rep.Name, err)
	}
	return nil
}

// deleteCA removes the Replicator's CA from the primary.
func (r *Reconciler) deleteCA(ctx context.Context, rep *flotillav1.Replicator) error {
	key := caSecretKey(rep)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the CA of Replicator %s: %w", rep.Name, err)
	}
	return nil
}

// certificateGVK is cert-manager's Certificate.
var certificateGVK = replication.Allowed["Certificate"]

// errCertificatesPending says cert-manager has not issued yet; the Replicator retries.
var errCertificatesPending = errors.New("waiting for cert-manager to issue")

// certManagerMaterial applies two cert-manager Certificates in the primary (server: every Ingress
// host; client: <replicator>-client), and maps the Secrets cert-manager writes (tls.crt, tls.key,
// ca.crt) to plumber's key names: ca-secret gets the server pair and ca.crt, cli-secret gets
// client.crt and client.key.
func (r *Reconciler) certManagerMaterial(ctx context.Context, in replication.Inputs) (server, cli map[string][]byte, applied []flotillav1.AppliedResource, err error) {
	rep := in.Replicator
	if _, err := r.ensureNamespace(ctx, in, PrimaryName, true, r.Client, r.Live); err != nil {
		return nil, nil, nil, err
	}
	ref := rep.Spec.TLS.IssuerRef
	issuer := map[string]any{"name": ref.Name, "kind": ref.Kind, "group": ref.Group}
	certs := []struct{ name, secret, cn, usage string }{
		{rep.Name + "-server", rep.Name + "-server-tls", "", "server auth"},
		{rep.Name + "-client", rep.Name + "-client-tls", rep.Name + "-client", "client auth"},
	}
	data := make([]map[string][]byte, len(certs))
	for _, c := range certs {
		spec := map[string]any{"secretName": c.secret, "issuerRef": issuer,
			"usages":         []any{"digital signature", "key encipherment", c.usage},
			"secretTemplate": map[string]any{"labels": map[string]any{flotillav1.LabelReplicator: flotillav1.ReplicatorLabelValue(rep.Name)}}}
		if c.cn != "" {
			spec["commonName"] = c.cn
		} else {
			hosts := make([]any, 0)
			for _, h := range replication.Hosts(rep) {
				hosts = append(hosts, h)
			}
			spec["dnsNames"] = hosts
		}
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetGroupVersionKind(certificateGVK)
		u.SetName(c.name)
		replication.Mark(u, in, replication.Place{Cluster: PrimaryName, Primary: true})
		if err := r.Client.Patch(ctx, u, client.Apply, client.FieldOwner(flotillav1.FieldManagerReplicator), client.ForceOwnership); err != nil { //nolint:staticcheck // unstructured apply
			return nil, nil, nil, fmt.Errorf("applying cert-manager Certificate %s (is cert-manager installed?): %w", c.name, err)
		}
		applied = append(applied, flotillav1.AppliedResource{Cluster: PrimaryName, Kind: "Certificate", Name: c.name, ApplyStatus: flotillav1.ApplyStatusOK})
	}
	// Both Certificates exist before either Secret is waited for: cert-manager issues them at once.
	for i, c := range certs {
		if data[i], err = r.secretData(ctx, client.ObjectKey{Namespace: rep.Spec.ReplicationNamespace, Name: c.secret}); err != nil {
			return nil, nil, applied, err
		}
		if len(data[i]["tls.crt"]) == 0 || len(data[i]["tls.key"]) == 0 {
			return nil, nil, applied, fmt.Errorf("%w Certificate %s (Secret %s)", errCertificatesPending, c.name, c.secret)
		}
	}
	server = map[string][]byte{"tls.crt": data[0]["tls.crt"], "tls.key": data[0]["tls.key"], "ca.crt": data[0]["ca.crt"]}
	cli = map[string][]byte{"client.crt": data[1]["tls.crt"], "client.key": data[1]["tls.key"]}
	return server, cli, applied, nil
}

// deleteIssuedSecrets removes the Secrets cert-manager wrote for the Replicator (it keeps them
// when their Certificate goes).
// issuedSecretNames are the Secrets cert-manager issues for a Replicator with tls.issuerRef (in
// its namespace of the primary): its own, though they carry cert-manager's labels, not its.
func issuedSecretNames(rep *flotillav1.Replicator) []string {
	if rep.Spec.TLS == nil || rep.Spec.TLS.IssuerRef == nil {
		return nil
	}
	return []string{rep.Name + "-server-tls", rep.Name + "-client-tls"}
}

func (r *Reconciler) deleteIssuedSecrets(ctx context.Context, rep *flotillav1.Replicator) error {
	if rep.Spec.TLS == nil || rep.Spec.TLS.IssuerRef == nil {
		return nil
	}
	for _, name := range issuedSecretNames(rep) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rep.Spec.ReplicationNamespace, Name: name}}
		if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Secret %s/%s: %w", s.Namespace, name, err)
		}
	}
	return nil
}
