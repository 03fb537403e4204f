package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A secondary named in Options.ResizableStorage also runs a resizing CSI stack, built by `make
// tools` (set csi) from test/tools/addons: its mock driver (the controller side of a CSI plugin, whose
// volumes are records in a file, with a largest size), and the kubernetes-csi external-provisioner
// and external-resizer, each a process on the host with the secondary's admin kubeconfig, as the
// local-path-provisioner is. It serves StorageClassResizable, whose claims are created, deleted
// and expanded as any CSI driver's are: a raised request is expanded by ControllerExpandVolume and
// the claim's capacity follows (VolumeResizeSuccessful); a size above CSIMockMaxVolumeSize is
// refused as infeasible (the claim's ControllerResizeError condition, VolumeResizeFailed).
//
// The driver serves no node side (NodeStage, NodePublish, node expansion): a real kubelet could
// not mount its volumes, so the class is for pods on fake nodes, which mount nothing.

const (
	// StorageClassResizable is the class of the resizing CSI stack, in the secondaries that run it.
	StorageClassResizable = "resizable"
	// CSIMockDriver is the mock driver's name: StorageClassResizable's provisioner.
	CSIMockDriver = "csi-mock.testbed.flotilla.dev"
	// CSIMockMaxVolumeSize is the largest volume the mock driver makes or expands to.
	CSIMockMaxVolumeSize = "4Gi"
)

// csiComponents are the stack's processes, in the order they start: the sidecars wait for the
// driver's socket.
var csiComponents = []string{"csi-mock", "csi-provisioner", "csi-resizer"}

// csiStarted is what each component logs once it serves: the driver once it listens, the
// provisioner once its informers synced (the sig-storage provisioner library's line), the
// resizer as its controller starts.
var csiStarted = map[string]string{
	"csi-mock":        "Serving CSI",
	"csi-provisioner": "Started provisioner controller",
	"csi-resizer":     "Starting external resizer",
}

// csiSocket is where the driver serves: in the cluster's folder, so stopping the bed removes it.
// A unix socket's path is at most 107 bytes.
func csiSocket(clusterDir string) (string, error) {
	p := filepath.Join(clusterDir, "csi", "csi.sock")
	if len(p) > 100 {
		return "", fmt.Errorf("the CSI driver's socket %s is longer than a unix socket's path may be: use a shorter bed folder", p)
	}
	return p, nil
}

// csiArgs are each component's flags. The sidecars run without leader election (one of each) and
// retry a failed expansion after at most 10 s, so a spec sees a fix soon.
func csiArgs(component, socket, kubeconfig, clusterDir string) []string {
	switch component {
	case "csi-mock":
		return []string{"-endpoint", "unix://" + socket, "-name", CSIMockDriver,
			"-state", filepath.Join(clusterDir, "csi", "volumes.json"), "-max-volume-size", CSIMockMaxVolumeSize, "-v", "3"}
	case "csi-provisioner":
		return []string{"--csi-address", socket, "--kubeconfig", kubeconfig, "--leader-election=false", "--timeout", "30s", "--v", "3"}
	default:
		return []string{"--csi-address", socket, "--kubeconfig", kubeconfig, "--leader-election=false",
			"--retry-interval-max", "10s", "--v", "3"}
	}
}

// resizableStorageClass is StorageClassResizable: bound when a pod uses it, as the bed's default
// class is, and expandable.
func resizableStorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: StorageClassResizable},
		Provisioner:          CSIMockDriver,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	}
}

// csiDriverObject tells the cluster's controllers that the driver needs no attachment (it has no
// ControllerPublish), so no VolumeAttachment waits for an attacher that is not there.
func csiDriverObject() *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: CSIMockDriver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}},
	}
}

func csiPIDFile(clusterDir, component string) string {
	return filepath.Join(clusterDir, "pids", component+".pid")
}

// startCSI starts a secondary's resizing CSI stack after its CSIDriver and StorageClass, and
// returns once each component serves. Run again after a restart, it starts them anew on the
// volumes the driver recorded.
func (b *Bed) startCSI(ctx context.Context, c *Cluster) error {
	socket, err := csiSocket(c.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return fmt.Errorf("creating the CSI folder of %s: %w", c.Name, err)
	}
	if _, err := c.Clientset.StorageV1().CSIDrivers().Create(ctx, csiDriverObject(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CSIDriver %s in %s: %w", CSIMockDriver, c.Name, err)
	}
	if _, err := c.Clientset.StorageV1().StorageClasses().Create(ctx, resizableStorageClass(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating StorageClass %s in %s: %w", StorageClassResizable, c.Name, err)
	}
	start := time.Now()
	for _, component := range csiComponents {
		bin := filepath.Join(b.tools.toolsDir, "csi", component)
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("the resizing CSI stack of %s: %w (make tools builds it: test/tools/install.sh csi)", c.Name, err)
		}
		if err := startCSIComponent(ctx, c, component, bin, csiArgs(component, socket, c.KubeconfigPath, c.dir)); err != nil {
			return err
		}
	}
	fmt.Fprintf(b.log, "testbed: cluster %s: resizing CSI stack (%s) up in %s, StorageClass %s\n",
		c.Name, strings.Join(csiComponents, ", "), time.Since(start).Round(100*time.Millisecond), StorageClassResizable)
	return nil
}

// startCSIComponent starts one process of the stack (startDaemonUntil).
func startCSIComponent(ctx context.Context, c *Cluster, component, bin string, args []string) error {
	return startDaemonUntil(ctx, component+"-"+c.Name, bin, args, filepath.Join(c.dir, "logs", component+".log"),
		csiPIDFile(c.dir, component), csiStarted[component])
}
