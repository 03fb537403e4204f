package uninstall

import (
	"context"
	"fmt"
	"io"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/document"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Plan is what an uninstall would do now, as its dry run reports it: each object it would stop,
// release or delete, by name, as the primary holds them. Empty lists are [] and an absent object
// "": the document says what is there, not what might be.
type Plan struct {
	Kind string `json:"kind"`
	// Deployment is the manager's Deployment it would scale to zero (namespace/name); "": none (a
	// manager out of cluster must be stopped by you).
	Deployment string `json:"deployment"`
	// WebhookConfiguration is deleted first: from then on no pod creation can fail on Flotilla.
	WebhookConfiguration string   `json:"webhookConfiguration"`
	VirtualNodes         []string `json:"virtualNodes"`
	ClusterDetectors     []string `json:"clusterDetectors"`
	// Certificate is the chart's cert-manager Certificate (namespace/name), deleted before its Secret.
	Certificate string   `json:"certificate"`
	Secrets     []string `json:"secrets"`
	ConfigMaps  []string `json:"configMaps"`
	// Lease is the manager's leader-election Lease (namespace/name), deleted last.
	Lease string `json:"lease"`
	// Orphaned is what --orphan lets go: their delegates, copies and real claims stay in the
	// secondaries, unmanaged.
	Orphaned InUse `json:"orphaned"`
	// Refusal is why uninstall would refuse, changing nothing; "": it would go ahead.
	Refusal string `json:"refusal"`
}

// planRemoval reads what Run would remove: the objects of the names o gives that exist, the
// virtual nodes and ClusterDetectors it would delete, and what it would orphan.
func planRemoval(ctx context.Context, c client.Client, o Options, inUse InUse, refusal error) (Plan, error) {
	names := o.names()
	ns := flotillav1.SystemNamespace
	p := Plan{Kind: "UninstallPlan", Orphaned: InUse{Proxies: []string{}, Replicators: []string{}, Claims: []string{}},
		VirtualNodes: []string{}, ClusterDetectors: []string{}, Secrets: []string{}, ConfigMaps: []string{}}
	if o.Orphan {
		p.Orphaned = inUse.orEmpty()
	}
	if refusal != nil {
		p.Refusal = refusal.Error()
	}
	present := func(obj client.Object, key client.ObjectKey) (bool, error) {
		err := c.Get(ctx, key, obj)
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			return false, nil
		}
		return false, fmt.Errorf("reading %s: %w", key, err)
	}
	single := []struct {
		obj  client.Object
		key  client.ObjectKey
		into *string
	}{
		{&appsv1.Deployment{}, client.ObjectKey{Namespace: o.Namespace, Name: o.Deployment}, &p.Deployment},
		{&admissionregistrationv1.MutatingWebhookConfiguration{}, client.ObjectKey{Name: names.WebhookConfiguration}, &p.WebhookConfiguration},
		{certificate(names), client.ObjectKey{Namespace: ns, Name: names.WebhookCertificate}, &p.Certificate},
		{&coordinationv1.Lease{}, client.ObjectKey{Namespace: o.Namespace, Name: o.Lease}, &p.Lease},
	}
	for _, s := range single {
		ok, err := present(s.obj, s.key)
		if err != nil {
			return Plan{}, err
		}
		if ok {
			*s.into = s.key.Name
			if s.key.Namespace != "" {
				*s.into = s.key.String()
			}
		}
	}
	for _, name := range SecretNames(names) {
		key := client.ObjectKey{Namespace: ns, Name: name}
		ok, err := present(&corev1.Secret{}, key)
		if err != nil {
			return Plan{}, err
		}
		if ok {
			p.Secrets = append(p.Secrets, key.String())
		}
	}
	key := client.ObjectKey{Namespace: ns, Name: names.CAConfigMap}
	ok, err := present(&corev1.ConfigMap{}, key)
	if err != nil {
		return Plan{}, err
	}
	if ok {
		p.ConfigMaps = append(p.ConfigMaps, key.String())
	}
	nodes, err := flotillasNodes(ctx, c)
	if err != nil {
		return Plan{}, err
	}
	for _, n := range nodes {
		p.VirtualNodes = append(p.VirtualNodes, n.Name)
	}
	detectors, err := clusterDetectors(ctx, c)
	if err != nil {
		return Plan{}, err
	}
	for _, cd := range detectors {
		p.ClusterDetectors = append(p.ClusterDetectors, cd.Name)
	}
	return p, nil
}

// certificate is the chart's cert-manager Certificate of the webhook, as an object to read or delete.
func certificate(names flotillav1.InstallNames) *unstructured.Unstructured {
	cert := &unstructured.Unstructured{}
	cert.SetAPIVersion("cert-manager.io/v1")
	cert.SetKind("Certificate")
	cert.SetNamespace(flotillav1.SystemNamespace)
	cert.SetName(names.WebhookCertificate)
	return cert
}

// print writes the plan as text, or as one json or yaml document.
func (p Plan) print(out io.Writer, format string) error {
	if format != "" {
		return document.Print(out, format, p)
	}
	_, err := io.WriteString(out, p.text())
	return err
}

// text is the plan as a dry run prints it without --output: one line per step, in Run's order.
func (p Plan) text() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, "  "+format+"\n", args...) }
	list := func(what string, items []string) {
		if len(items) > 0 {
			line("delete %s: %s", what, strings.Join(items, ", "))
		}
	}
	b.WriteString("dry run: uninstall would\n")
	if p.Deployment != "" {
		line("scale Deployment %s to zero, and wait until no manager holds its Lease", p.Deployment)
	} else {
		line("find no Deployment of the manager (a manager out of cluster must be stopped by you), and wait until none holds its Lease")
	}
	if p.WebhookConfiguration != "" {
		line("delete MutatingWebhookConfiguration %s", p.WebhookConfiguration)
	}
	if !p.Orphaned.Empty() {
		line("orphan %s: their delegates, copies and real claims stay in the secondaries, unmanaged", p.Orphaned)
	}
	list("virtual nodes", p.VirtualNodes)
	list("ClusterDetectors", p.ClusterDetectors)
	if p.Certificate != "" {
		line("delete Certificate %s", p.Certificate)
	}
	list("Secrets", p.Secrets)
	list("ConfigMaps", p.ConfigMaps)
	if p.Lease != "" {
		line("delete Lease %s", p.Lease)
	}
	if p.Refusal != "" {
		fmt.Fprintf(&b, "and refuses, changing nothing: %s\n", p.Refusal)
	}
	return b.String()
}
