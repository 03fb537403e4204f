package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Kueue in the bed: its controller manager (`make tools`, set kueue: built from sigs.k8s.io/kueue
// at KUEUE_VERSION) runs on the host against one cluster, with the CRDs and the webhooks of the
// same release, as a user's install would run it in the cluster:
//   - its webhooks are served on 127.0.0.1 with a certificate the bed issues, named by URL (no
//     Service: nothing of it runs in the cluster), internal certificate management off;
//   - its pod and Job webhooks, and the namespaces it manages, are those labelled
//     KueueManagedLabel, so that the rest of a shared bed never meets it;
//   - leader election is off, and the visibility API (an aggregated API server) is not served.
//
// Kueue reads its metrics server's certificate from a fixed path, /etc/kueue/metrics/certs, with
// internal certificate management off. The bed writes one there when the folder is missing, and
// removes it with the last Kueue it started: that is a change to the host, so only root may run
// Kueue here (KueueRunnable says why not).
const (
	// KueueNamespace is where Kueue looks for its own objects (MultiKueue's ClusterProfiles and
	// kubeconfig Secrets among them) unless KueueOptions.Namespace says otherwise.
	KueueNamespace = "kueue-system"
	// KueueManagedLabel marks the namespaces whose pods and Jobs Kueue manages.
	KueueManagedLabel = "e2e.flotilla.dev/kueue"
	// kueueVersionKey is KUEUE_VERSION in test/tools/versions.env.
	kueueVersionKey = "KUEUE_VERSION"
	// kueueMetricsCerts is the folder Kueue reads its metrics certificate from.
	kueueMetricsCerts = "/etc/kueue/metrics/certs"
)

// KueueFiles are Kueue's manager, its CRDs and its webhook manifests as `make tools` caches them.
func KueueFiles(toolsDir string) (manager, crds, webhooks string, err error) {
	dir, err := ToolsDir(toolsDir)
	if err != nil {
		return "", "", "", err
	}
	version, err := toolVersion(kueueVersionKey)
	if err != nil {
		return "", "", "", err
	}
	manager = filepath.Join(dir, "kueue-"+version)
	crds = filepath.Join(dir, "kueue-crds-"+version+".yaml")
	webhooks = filepath.Join(dir, "kueue-webhooks-"+version+".yaml")
	for _, f := range []string{manager, crds, webhooks} {
		if _, err := os.Stat(f); err != nil {
			return "", "", "", fmt.Errorf("kueue %s is not built (test/tools/install.sh kueue): %w", version, err)
		}
	}
	return manager, crds, webhooks, nil
}

// KueueRunnable says why Kueue cannot run on this host ("" when it can): its metrics certificate
// must be in /etc/kueue/metrics/certs, which the bed writes only as root.
func KueueRunnable() string {
	if _, err := os.Stat(filepath.Join(kueueMetricsCerts, "tls.crt")); err == nil {
		return ""
	}
	if os.Geteuid() != 0 {
		return "Kueue " + kueueMetricsCerts + " is missing and only root may write it (Kueue reads its metrics certificate there when it does not manage its own)"
	}
	return ""
}

// KueueOptions are what StartKueue runs Kueue with.
type KueueOptions struct {
	// ToolsDir is where `make tools` put Kueue ("" means ToolsDir("")).
	ToolsDir string
	// Dir holds its configuration, certificates and log.
	Dir string
	// Namespace is Kueue's own (where MultiKueue reads ClusterProfiles); "" means KueueNamespace.
	Namespace string
	// FeatureGates are set on Kueue's command line, beside VisibilityOnDemand=false.
	FeatureGates map[string]bool
	// CredentialsProviders is MultiKueue's clusterProfile.credentialsProviders, as YAML (the
	// ExecConfig of each), "" for none.
	CredentialsProviders string
}

// Kueue is a running Kueue controller manager and what it installed besides its CRDs.
type Kueue struct {
	Process  *Process
	LogPath  string
	cluster  *Cluster
	webhooks []string // the names of its webhook configurations
}

var (
	kueueMetricsMu    sync.Mutex
	kueueMetricsUsers int    // Kueues running that read kueueMetricsCerts
	kueueMetricsMade  string // the first folder of kueueMetricsCerts the bed made, removed after the last
)

// StartKueue installs Kueue's CRDs and webhooks in c and runs its manager on the host against c's
// kubeconfig. It returns once Kueue's webhooks answer; Stop stops it and removes the webhooks.
func StartKueue(ctx context.Context, c *Cluster, o KueueOptions) (*Kueue, error) {
	if why := KueueRunnable(); why != "" {
		return nil, errors.New(why)
	}
	manager, crds, manifests, err := KueueFiles(o.ToolsDir)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.Dir, "kueue-"+c.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := applyCRDs(ctx, c, crds); err != nil {
		return nil, fmt.Errorf("kueue CRDs in %s: %w", c.Name, err)
	}
	if o.Namespace == "" {
		o.Namespace = KueueNamespace
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}
	if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s in %s: %w", o.Namespace, c.Name, err)
	}
	ca, err := writeServingCert(filepath.Join(dir, "certs"), "flotilla-testbed-kueue", net.IPv4(127, 0, 0, 1))
	if err != nil {
		return nil, err
	}
	if err := useKueueMetricsCerts(); err != nil {
		return nil, err
	}
	k := &Kueue{cluster: c, LogPath: filepath.Join(dir, "kueue.log")}
	ok := false
	defer func() {
		if !ok {
			_ = k.Stop(context.WithoutCancel(ctx))
		}
	}()
	webhookPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	healthPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(kueueConfig(o.Namespace, webhookPort, healthPort, filepath.Join(dir, "certs"), o.CredentialsProviders)), 0o600); err != nil {
		return nil, fmt.Errorf("writing Kueue's configuration: %w", err)
	}
	if k.webhooks, err = installKueueWebhooks(ctx, c, manifests, fmt.Sprintf("https://127.0.0.1:%d", webhookPort), ca); err != nil {
		return nil, err
	}
	gates := []string{"VisibilityOnDemand=false"}
	for g, on := range o.FeatureGates {
		gates = append(gates, fmt.Sprintf("%s=%t", g, on))
	}
	k.Process, err = StartProcess("kueue ("+c.Name+")", manager, []string{"--config", config, "--kubeconfig", c.KubeconfigPath,
		"--feature-gates", strings.Join(gates, ","), "--zap-log-level", "2"}, k.LogPath)
	if err != nil {
		return nil, err
	}
	if err := WaitHTTPOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort), time.Minute, func() bool { return !k.Process.Exited() }); err != nil {
		return nil, fmt.Errorf("kueue in %s not ready (log %s): %w\n%s", c.Name, k.LogPath, err, tail(k.LogPath, 20))
	}
	ok = true
	return k, nil
}

// Stop stops Kueue and removes its webhook configurations (its CRDs and what they hold stay, as
// after a user's uninstall); the last Kueue to stop removes the metrics certificate the bed wrote.
func (k *Kueue) Stop(ctx context.Context) error {
	var errs []error
	if k.Process != nil {
		errs = append(errs, k.Process.Stop(10*time.Second))
	}
	adm := k.cluster.Clientset.AdmissionregistrationV1()
	for _, name := range k.webhooks {
		if err := adm.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
		if err := adm.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, releaseKueueMetricsCerts())
	return errors.Join(errs...)
}

// kueueConfig is Kueue's Configuration for a manager on the host: webhooks on 127.0.0.1 with the
// bed's certificate, no leader election, no metrics server (port 0), the namespaces labelled
// KueueManagedLabel managed, plain pods and Jobs integrated, MultiKueue's credentials providers.
func kueueConfig(namespace string, webhookPort, healthPort int, certDir, credentialsProviders string) string {
	var mk string
	if credentialsProviders != "" {
		mk = "multiKueue:\n  gcInterval: 30s\n  clusterProfile:\n    credentialsProviders:\n" + indent(credentialsProviders, "    ")
	}
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
managedJobsNamespaceSelector:
  matchExpressions:
  - key: %s
    operator: Exists
integrations:
  frameworks:
  - batch/job
  - pod
%s`, namespace, healthPort, webhookPort, certDir, KueueManagedLabel, mk)
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// installKueueWebhooks installs the webhooks of Kueue's manifests that serve what the bed's Kueue
// integrates (pods, Jobs, Kueue's own kinds), each calling url plus its path with the bed's CA,
// the pod and Job ones only for namespaces labelled KueueManagedLabel. It returns the name of the
// configurations (one mutating, one validating).
func installKueueWebhooks(ctx context.Context, c *Cluster, manifests, url string, ca []byte) ([]string, error) {
	raw, err := os.ReadFile(manifests)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", manifests, err)
	}
	w := kueueWebhooks{url: url, ca: ca}
	name := "kueue-" + c.Name
	adm := c.Clientset.AdmissionregistrationV1()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", manifests, err)
		}
		body, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		switch doc["kind"] {
		case "MutatingWebhookConfiguration":
			var m admissionregistrationv1.MutatingWebhookConfiguration
			if err := yaml.Unmarshal(body, &m); err != nil {
				return nil, err
			}
			keep := m.Webhooks[:0]
			for _, hook := range m.Webhooks {
				if w.rewrite(hook.Rules, &hook.ClientConfig, &hook.NamespaceSelector) {
					keep = append(keep, hook)
				}
			}
			m.ObjectMeta, m.Webhooks = metav1.ObjectMeta{Name: name}, keep
			if _, err := adm.MutatingWebhookConfigurations().Create(ctx, &m, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("installing Kueue's mutating webhooks in %s: %w", c.Name, err)
			}
		case "ValidatingWebhookConfiguration":
			var v admissionregistrationv1.ValidatingWebhookConfiguration
			if err := yaml.Unmarshal(body, &v); err != nil {
				return nil, err
			}
			keep := v.Webhooks[:0]
			for _, hook := range v.Webhooks {
				if w.rewrite(hook.Rules, &hook.ClientConfig, &hook.NamespaceSelector) {
					keep = append(keep, hook)
				}
			}
			v.ObjectMeta, v.Webhooks = metav1.ObjectMeta{Name: name}, keep
			if _, err := adm.ValidatingWebhookConfigurations().Create(ctx, &v, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("installing Kueue's validating webhooks in %s: %w", c.Name, err)
			}
		}
	}
	return []string{name}, nil
}

// kueueWebhooks rewrites Kueue's webhooks for a manager on the host.
type kueueWebhooks struct {
	url string
	ca  []byte
}

// rewrite says whether a webhook serves what the bed's Kueue integrates, and points it at the
// host: its URL and the bed's CA; a pod or Job webhook only for the namespaces Kueue manages.
func (k kueueWebhooks) rewrite(rules []admissionregistrationv1.RuleWithOperations, cc *admissionregistrationv1.WebhookClientConfig,
	namespaces **metav1.LabelSelector) bool {
	keep, namespaced := false, false
	for _, r := range rules {
		for _, g := range r.APIGroups {
			switch g {
			case "kueue.x-k8s.io":
				keep = true
			case "", "batch":
				keep, namespaced = true, true
			}
		}
	}
	if !keep {
		return false
	}
	path := "/"
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	u := k.url + path
	*cc = admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: k.ca}
	if namespaced {
		*namespaces = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: KueueManagedLabel, Operator: metav1.LabelSelectorOpExists}}}
	}
	return true
}

// useKueueMetricsCerts makes sure Kueue's metrics certificate is there, writing it when missing.
func useKueueMetricsCerts() error {
	kueueMetricsMu.Lock()
	defer kueueMetricsMu.Unlock()
	if _, err := os.Stat(filepath.Join(kueueMetricsCerts, "tls.crt")); err != nil {
		if _, err := os.Stat(kueueMetricsCerts); err == nil {
			return fmt.Errorf("%s is there without a certificate: not the bed's to fill", kueueMetricsCerts)
		}
		made := kueueMetricsCerts
		for p := filepath.Dir(made); p != "/"; p = filepath.Dir(p) {
			if _, err := os.Stat(p); err == nil {
				break
			}
			made = p
		}
		if _, err := writeServingCert(kueueMetricsCerts, "flotilla-testbed-kueue-metrics", net.IPv4(127, 0, 0, 1)); err != nil {
			return errors.Join(fmt.Errorf("writing Kueue's metrics certificate in %s: %w", kueueMetricsCerts, err), os.RemoveAll(made))
		}
		kueueMetricsMade = made
	}
	kueueMetricsUsers++
	return nil
}

// releaseKueueMetricsCerts removes the metrics certificate the bed wrote once no Kueue it started
// runs: /etc is left as it was found.
func releaseKueueMetricsCerts() error {
	kueueMetricsMu.Lock()
	defer kueueMetricsMu.Unlock()
	if kueueMetricsUsers > 0 {
		kueueMetricsUsers--
	}
	if kueueMetricsUsers > 0 || kueueMetricsMade == "" {
		return nil
	}
	made := kueueMetricsMade
	kueueMetricsMade = ""
	return os.RemoveAll(made)
}
