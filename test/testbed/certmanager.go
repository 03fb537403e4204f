package testbed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// cert-manager in the bed: its controller (test/tools/kube/cert-manager-controller, built by `make
// tools`) runs on the host against one cluster, with the CRDs of the same release. Neither its webhook nor its
// cainjector runs:
//   - without cert-manager's ValidatingWebhookConfiguration, the API server accepts its resources
//     as the CRDs' OpenAPI schemas allow, and the controller reports a resource it cannot use in
//     its status instead of the create being refused; without its MutatingWebhookConfiguration,
//     CertificateRequests carry no requester identity, which only an approval policy would read
//     (the bed's approver approves every request);
//   - the cainjector fills caBundle fields of webhook configurations, APIServices and CRD
//     conversion webhooks; the bed has none of cert-manager's, and its CRDs serve one version.
const (
	// CertManagerNamespace holds the probe StartCertManager issues and the Secrets ClusterIssuers
	// refer to (the controller's --cluster-resource-namespace). Leader election is off, so no Lease.
	CertManagerNamespace = "cert-manager"
	// certManagerVersionKey is CERT_MANAGER_VERSION in test/tools/versions.env.
	certManagerVersionKey = "CERT_MANAGER_VERSION"
	certManagerProbe      = "testbed-probe"
	certManagerFieldOwner = "flotilla-testbed"
)

// CertManagerControllers are the controllers StartCertManager runs: those that make SelfSigned
// and CA Issuers ready, approve and sign their CertificateRequests, and take Certificates from
// their spec to an issued Secret (trigger, key manager, request manager, issuing, readiness,
// revision manager). No ACME, ClusterIssuer, ingress or gateway shim controller.
var CertManagerControllers = []string{
	"issuers",
	"certificaterequests-approver",
	"certificaterequests-issuer-selfsigned",
	"certificaterequests-issuer-ca",
	"certificates-trigger",
	"certificates-key-manager",
	"certificates-request-manager",
	"certificates-issuing",
	"certificates-readiness",
	"certificates-revision-manager",
}

// CertManagerVersion is the cert-manager release the bed uses (test/tools/versions.env).
func CertManagerVersion() (string, error) { return toolVersion(certManagerVersionKey) }

// toolVersion reads one version from test/tools/versions.env, the one place they live.
func toolVersion(key string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testbed: cannot locate test/tools/versions.env")
	}
	path := filepath.Join(filepath.Dir(file), "..", "tools", "versions.env")
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", key, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok && v != "" {
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return "", fmt.Errorf("%s names no %s", path, key)
}

// CertManagerFiles are the controller binary and the CRDs `make tools` caches for a version.
func CertManagerFiles(toolsDir, version string) (bin, crds string) {
	return filepath.Join(toolsDir, "cert-manager-controller-"+version), filepath.Join(toolsDir, "cert-manager-crds-"+version+".yaml")
}

// certManagerTools is the tools directory ("" for the default) and cert-manager's version.
func certManagerTools(toolsDir string) (dir, version string, err error) {
	if dir, err = ToolsDir(toolsDir); err != nil {
		return "", "", err
	}
	version, err = CertManagerVersion()
	return dir, version, err
}

// CAInjectorFile is the cainjector binary `make tools` caches for a version.
func CAInjectorFile(toolsDir, version string) string {
	return filepath.Join(toolsDir, "cert-manager-cainjector-"+version)
}

// StartCAInjector runs cert-manager's CA injector (MutatingWebhookConfigurations only) on the host
// against c, logging to dir/cainjector-<cluster>.log; StartCertManager must have installed the
// CRDs. The caller stops the Process. toolsDir "" means ToolsDir("").
func StartCAInjector(c *Cluster, toolsDir, dir string) (*Process, error) {
	toolsDir, version, err := certManagerTools(toolsDir)
	if err != nil {
		return nil, err
	}
	bin := CAInjectorFile(toolsDir, version)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("testbed: cert-manager cainjector %s missing: run `make tools` first: %w", version, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	logPath := filepath.Join(dir, "cainjector-"+c.Name+".log")
	p, err := StartProcess("cert-manager cainjector ("+c.Name+")", bin, []string{"--kubeconfig", c.KubeconfigPath, "-v=2"}, logPath)
	if err != nil {
		return nil, err
	}
	// It has nothing to show it works before it injects; one that fails does so at once.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return nil, fmt.Errorf("cert-manager cainjector %s in %s exited (log %s):\n%s", version, c.Name, logPath, tail(logPath, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p, nil
}

// StartCertManager installs cert-manager's CRDs in c and runs its controller on the host against
// c's kubeconfig (leader election off, only CertManagerControllers), logging to
// dir/cert-manager-<cluster>.log. It returns once the controller has issued a probe Certificate
// from a SelfSigned Issuer; the caller stops the Process. toolsDir "" means ToolsDir("").
func StartCertManager(ctx context.Context, c *Cluster, toolsDir, dir string) (*Process, error) {
	toolsDir, version, err := certManagerTools(toolsDir)
	if err != nil {
		return nil, err
	}
	bin, crds := CertManagerFiles(toolsDir, version)
	for _, f := range []string{bin, crds} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("testbed: cert-manager %s: %s missing: run `make tools` first: %w", version, f, err)
		}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}

	if err := applyCRDs(ctx, c, crds); err != nil {
		return nil, fmt.Errorf("cert-manager %s CRDs in %s: %w", version, c.Name, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CertManagerNamespace}}
	if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s in %s: %w", CertManagerNamespace, c.Name, err)
	}

	logPath := filepath.Join(dir, "cert-manager-"+c.Name+".log")
	p, err := StartProcess("cert-manager controller ("+c.Name+")", bin, []string{
		"--kubeconfig", c.KubeconfigPath,
		"--controllers", strings.Join(CertManagerControllers, ","),
		"--cluster-resource-namespace", CertManagerNamespace,
		"-v=2",
	}, logPath)
	if err != nil {
		return nil, err
	}
	if err := probeCertManager(ctx, c, p, time.Minute); err != nil {
		stopErr := p.Stop(5 * time.Second)
		return nil, errors.Join(fmt.Errorf("cert-manager %s in %s (log %s): %w\n%s", version, c.Name, logPath, err, tail(logPath, 20)), stopErr)
	}
	return p, nil
}

// applyCRDs server-side applies every CRD of a multi-document file and waits until each is
// established.
func applyCRDs(ctx context.Context, c *Cluster, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	cs, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("building apiextensions client: %w", err)
	}
	crdClient := cs.ApiextensionsV1().CustomResourceDefinitions()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var names []string
	var served []servedResource
	for {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := dec.Decode(&crd); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("decoding %s: %w", path, err)
		}
		if crd.Name == "" {
			continue // an empty document
		}
		crd.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
		body, err := json.Marshal(&crd)
		if err != nil {
			return fmt.Errorf("encoding CRD %s: %w", crd.Name, err)
		}
		force := true
		if _, err := crdClient.Patch(ctx, crd.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: certManagerFieldOwner, Force: &force}); err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served = append(served, servedResource{groupVersion: crd.Spec.Group + "/" + v.Name, plural: crd.Spec.Names.Plural})
			}
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("%s holds no CRD", path)
	}
	if err := waitCRDsEstablished(ctx, cs, names); err != nil {
		return err
	}
	return waitDiscovered(ctx, c, served)
}

// servedResource is a resource a CRD serves, as discovery lists it.
type servedResource struct{ groupVersion, plural string }

// waitDiscovered waits until the API server's discovery lists each resource: a CRD is established
// a moment before, and a controller started then builds its REST mapper without it (Kueue exits:
// "no matches for kind Workload in version kueue.x-k8s.io/v1beta2").
func waitDiscovered(ctx context.Context, c *Cluster, resources []servedResource) error {
	for _, r := range resources {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			list, err := c.Clientset.Discovery().ServerResourcesForGroupVersion(r.groupVersion)
			if err != nil {
				return false, nil //nolint:nilerr // not listed yet: poll again
			}
			return slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == r.plural }), nil
		})
		if err != nil {
			return fmt.Errorf("%s of %s not in discovery within 30s: %w", r.plural, r.groupVersion, err)
		}
	}
	return nil
}

// waitCRDsEstablished waits until each named CRD is established: its resources are served.
func waitCRDsEstablished(ctx context.Context, cs apiextensionsclient.Interface, names []string) error {
	crdClient := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := crdClient.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not visible yet: poll again
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established within 30s: %w", name, err)
		}
	}
	return nil
}

var (
	issuerGVR      = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	certificateGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
)

// probeCertManager has the controller issue a Certificate from a SelfSigned Issuer in
// CertManagerNamespace, waits (within timeout) until the Certificate is Ready, and removes the
// probe again. It fails at once when the controller exits.
func probeCertManager(ctx context.Context, c *Cluster, p *Process, timeout time.Duration) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("building dynamic client: %w", err)
	}
	issuers := dyn.Resource(issuerGVR).Namespace(CertManagerNamespace)
	certs := dyn.Resource(certificateGVR).Namespace(CertManagerNamespace)
	issuer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
		"metadata": map[string]any{"name": certManagerProbe},
		"spec":     map[string]any{"selfSigned": map[string]any{}},
	}}
	cert := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": certManagerProbe},
		"spec": map[string]any{
			"commonName": certManagerProbe, "secretName": certManagerProbe,
			"issuerRef": map[string]any{"name": certManagerProbe, "kind": "Issuer"},
		},
	}}
	for _, o := range []struct {
		r   dynamic.ResourceInterface
		obj *unstructured.Unstructured
	}{{issuers, issuer}, {certs, cert}} {
		if _, err := o.r.Create(ctx, o.obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating probe %s: %w", o.obj.GetKind(), err)
		}
	}

	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, errors.New("the controller exited")
		}
		got, err := certs.Get(ctx, certManagerProbe, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready, msg := CertManagerReady(got)
		last = "probe Certificate: " + msg
		return ready, nil
	})
	if err != nil {
		return fmt.Errorf("no probe Certificate issued within %s (last: %s): %w", timeout, last, err)
	}

	// The probe has done its work; cert-manager leaves the Secret when its Certificate goes.
	var errs []error
	if err := certs.Delete(ctx, certManagerProbe, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting probe Certificate: %w", err))
	}
	if err := issuers.Delete(ctx, certManagerProbe, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting probe Issuer: %w", err))
	}
	if err := c.Clientset.CoreV1().Secrets(CertManagerNamespace).Delete(ctx, certManagerProbe, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting probe Secret: %w", err))
	}
	return errors.Join(errs...)
}

// CertManagerReady reads a cert-manager resource's Ready condition (an Issuer's, a Certificate's):
// whether it is True, and what it says.
func CertManagerReady(u *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		cond, ok := raw.(map[string]any)
		if !ok || cond["type"] != "Ready" {
			continue
		}
		return cond["status"] == "True", fmt.Sprintf("Ready=%v %v: %v", cond["status"], cond["reason"], cond["message"])
	}
	return false, "no Ready condition yet"
}

// tail returns the last n lines of a file ("" when it cannot be read).
func tail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return lastLines(string(raw), n)
}
