package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/config"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/test/testbed"
)

var e2eScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(flotillav1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}()

// clientOf is a controller-runtime client of a bed cluster, as its admin.
func clientOf(c *testbed.Cluster) client.Client {
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: e2eScheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// installCRDs installs Flotilla's CRDs in a cluster, as the chart would, and waits until they are served.
func installCRDs(ctx context.Context, c *testbed.Cluster) error {
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: e2eScheme})
	if err != nil {
		return err
	}
	files, err := fs.Glob(config.CRDs, "crd/bases/*.yaml")
	if err != nil {
		return err
	}
	for _, f := range files {
		raw, err := config.CRDs.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := cl.Create(ctx, &crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var got apiextensionsv1.CustomResourceDefinition
			if err := cl.Get(ctx, client.ObjectKey{Name: crd.Name}, &got); err != nil {
				return false, nil //nolint:nilerr // not visible yet
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", crd.Name, err)
		}
	}
	return nil
}

// flotillactl runs the CLI against the bed's kubeconfig, the primary as primary context.
func flotillactl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	full := append([]string{"--kubeconfig", bed.KubeconfigPath, "--primary-context", testbed.PrimaryName}, args...)
	cmd := exec.CommandContext(ctx, cliBin, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// editRegistration rewrites the registration Secret's raw kubeconfig.
func editRegistration(ctx context.Context, edit func(raw []byte) []byte) {
	cl := clientOf(bed.Primary)
	var secret corev1.Secret
	Expect(cl.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.KubeconfigSecretName}, &secret)).To(Succeed())
	secret.Data[flotillav1.KubeconfigSecretKey] = edit(secret.Data[flotillav1.KubeconfigSecretKey])
	Expect(cl.Update(ctx, &secret)).To(Succeed())
}

// editRegistrationConfig edits the registration kubeconfig as a structure.
func editRegistrationConfig(ctx context.Context, edit func(cfg *clientcmdapi.Config)) {
	editRegistration(ctx, func(raw []byte) []byte {
		cfg, err := clientcmd.Load(raw)
		Expect(err).NotTo(HaveOccurred())
		edit(cfg)
		out, err := clientcmd.Write(*cfg)
		Expect(err).NotTo(HaveOccurred())
		return out
	})
}

// detector reads a ClusterDetector.
func detector(ctx context.Context, name string) (*flotillav1.ClusterDetector, error) {
	var cd flotillav1.ClusterDetector
	err := clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}, &cd)
	return &cd, err
}

// nodeReady returns the status of a node's Ready condition ("" when the node is missing).
func nodeReady(ctx context.Context, name string) (corev1.ConditionStatus, error) {
	n, err := bed.Primary.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status, nil
		}
	}
	return "", nil
}
