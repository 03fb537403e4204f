package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Every secondary has a dynamic volume provisioner: rancher's local-path-provisioner (built from
// its module by `make tools`), run on the host with the secondary's admin kubeconfig, as the
// metrics-server is. It serves the secondary's default StorageClass, StorageClassLocalPath: a
// claim is provisioned once a pod using it is scheduled (WaitForFirstConsumer), as a directory
// under Cluster.VolumesDir on the chosen node, which a helper pod creates there (and removes when
// the volume is deleted). The helper pods run the application image (TestAppImage): real nodes
// pull nothing, and the bed imports that image into every secondary real node.
//
// Only a real node holds data. On a fake node kwok completes the helper pod without running it,
// so the claim binds and its pod runs, but no directory is ever made.

const (
	// StorageClassLocalPath is each secondary's default StorageClass.
	StorageClassLocalPath = "local-path"
	// LocalPathProvisioner is the provisioner name of StorageClassLocalPath.
	LocalPathProvisioner = "rancher.io/local-path"
	// LocalPathNamespace is where the provisioner runs its helper pods, and keeps its ConfigMap.
	LocalPathNamespace = "local-path-storage"
)

// localPathVersionKey names the version `make tools` builds in test/tools/versions.env.
const localPathVersionKey = "LOCAL_PATH_PROVISIONER_VERSION"

const (
	localPathName           = "local-path-provisioner"
	localPathServiceAccount = "local-path-provisioner-service-account"
	localPathConfigMap      = "local-path-config"
	// localPathAllNodes is the provisioner's nodePathMap entry for every node it does not name.
	localPathAllNodes = "DEFAULT_PATH_FOR_NON_LISTED_NODES"
	// localPathStarted is what the provisioner logs once its informers have synced (the
	// sig-storage provisioner library's line); the bed waits for it.
	localPathStarted = "Started provisioner controller"
)

// The helper pods' scripts, run by the testapp's shell: kept to what it understands. The volume
// is world-writable, as the provisioner's own scripts make it, so that pods of any user can write.
const (
	localPathSetup    = "mkdir -m 0777 -p \"$VOL_DIR\"\n"
	localPathTeardown = "rm -rf \"$VOL_DIR\"\n"
)

// VolumesDir is where a secondary's local-path volumes live on the host, one directory per
// volume (<PV>_<namespace>_<claim>). It is in the cluster's folder, so stopping the bed removes it.
func (c *Cluster) VolumesDir() string { return volumesDir(c.dir) }

func volumesDir(clusterDir string) string { return filepath.Join(clusterDir, "volumes") }

// localPathPIDFile records a secondary's provisioner beside kwokctl's own PID files, as the
// metrics-server's: stopping or deleting the cluster stops it too.
func localPathPIDFile(clusterDir string) string {
	return filepath.Join(clusterDir, "pids", localPathName+".pid")
}

// localPathConfig is the provisioner's config.json: every node's volumes under volumesDir.
func localPathConfig(volumesDir string) ([]byte, error) {
	cfg := map[string]any{
		"nodePathMap": []any{map[string]any{"node": localPathAllNodes, "paths": []string{volumesDir}}},
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the local-path config: %w", err)
	}
	return raw, nil
}

// localPathHelperPod is the template of the provisioner's helper pods. The provisioner adds the
// node, the volumes (the volume's parent dir as a hostPath, the scripts from its ConfigMap), the
// command (sh /script/setup or teardown), VOL_DIR and a toleration of every taint; the rest is
// the bed's: the application image, never pulled, and root, as the volume's parent dir belongs
// to root on the node.
func localPathHelperPod() ([]byte, error) {
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "helper-pod"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext:              &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0), RunAsGroup: ptr.To[int64](0)},
			Tolerations:                  []corev1.Toleration{{Key: RealNodeKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name:            "helper-pod",
				Image:           TestAppImage,
				ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
	raw, err := yaml.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encoding the local-path helper pod: %w", err)
	}
	return raw, nil
}

// localPathStorageClass is the secondaries' default StorageClass. Expansion is allowed, so a
// claim's request may grow; local-path has no resizer, so the volume stays as it is (a directory
// has no size) and the claim's capacity keeps its first value.
func localPathStorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClassLocalPath,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:          LocalPathProvisioner,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	}
}

// localPathFiles are the provisioner's files in dir (config.json, helperPod.yaml) and the data
// of its ConfigMap, which also carries the scripts its helper pods mount.
func localPathFiles(clusterDir string) (files map[string][]byte, configMap map[string]string, err error) {
	cfg, err := localPathConfig(volumesDir(clusterDir))
	if err != nil {
		return nil, nil, err
	}
	helper, err := localPathHelperPod()
	if err != nil {
		return nil, nil, err
	}
	files = map[string][]byte{"config.json": cfg, "helperPod.yaml": helper}
	configMap = map[string]string{"config.json": string(cfg), "helperPod.yaml": string(helper),
		"setup": localPathSetup, "teardown": localPathTeardown}
	return files, configMap, nil
}

// startLocalPath starts a secondary's volume provisioner, after its namespace, ServiceAccount
// (the helper pods'), ConfigMap and StorageClass; it returns once the provisioner's informers
// have synced. Run again after a restart, it updates what exists.
func (b *Bed) startLocalPath(ctx context.Context, c *Cluster) error {
	version, err := toolVersion(localPathVersionKey)
	if err != nil {
		return err
	}
	bin := filepath.Join(b.tools.toolsDir, localPathName+"-"+version)
	dir := filepath.Join(c.dir, localPathName)
	if err := os.MkdirAll(c.VolumesDir(), 0o755); err != nil {
		return fmt.Errorf("creating the volumes dir of %s: %w", c.Name, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	files, data, err := localPathFiles(c.dir)
	if err != nil {
		return err
	}
	for name, raw := range files {
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o600); err != nil {
			return fmt.Errorf("writing the local-path %s of %s: %w", name, c.Name, err)
		}
	}
	if err := createLocalPathObjects(ctx, c, data); err != nil {
		return err
	}
	args := []string{"--debug", "start",
		"--kubeconfig", c.KubeconfigPath,
		"--namespace", LocalPathNamespace,
		"--service-account-name", localPathServiceAccount,
		"--configmap-name", localPathConfigMap,
		"--provisioner-name", LocalPathProvisioner,
		"--config", filepath.Join(dir, "config.json"),
		"--helper-pod-file", filepath.Join(dir, "helperPod.yaml"),
		// Unused by this version (the helper pod file names the image); given for a version that reads it.
		"--helper-image", TestAppImage,
	}
	start := time.Now()
	if err := startDaemonUntil(ctx, localPathName+"-"+c.Name, bin, args, filepath.Join(c.dir, "logs", localPathName+".log"),
		localPathPIDFile(c.dir), localPathStarted); err != nil {
		return err
	}
	fmt.Fprintf(b.log, "testbed: cluster %s: local-path-provisioner up in %s, volumes in %s\n",
		c.Name, time.Since(start).Round(100*time.Millisecond), c.VolumesDir())
	return nil
}

// createLocalPathObjects creates the provisioner's namespace, ServiceAccount, ConfigMap (updated
// when it exists) and StorageClass.
func createLocalPathObjects(ctx context.Context, c *Cluster, data map[string]string) error {
	core := c.Clientset.CoreV1()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: LocalPathNamespace}}
	if _, err := core.Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s in %s: %w", LocalPathNamespace, c.Name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: localPathServiceAccount, Namespace: LocalPathNamespace}}
	if _, err := core.ServiceAccounts(LocalPathNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the local-path ServiceAccount in %s: %w", c.Name, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: localPathConfigMap, Namespace: LocalPathNamespace}, Data: data}
	cms := core.ConfigMaps(LocalPathNamespace)
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("updating the local-path ConfigMap in %s: %w", c.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("creating the local-path ConfigMap in %s: %w", c.Name, err)
	}
	sc := localPathStorageClass()
	if _, err := c.Clientset.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating StorageClass %s in %s: %w", sc.Name, c.Name, err)
	}
	return nil
}

// startDaemonUntil starts a daemon of a cluster (StartDaemon), records its PID in pidFile, beside
// kwokctl's (stopping the cluster stops it), and waits, a minute at most, until what it logged
// since it started holds started. After a restart the log holds the previous run's lines: only
// what follows counts.
func startDaemonUntil(ctx context.Context, name, bin string, args []string, logPath, pidFile, started string) error {
	var offset int64
	if info, err := os.Stat(logPath); err == nil {
		offset = info.Size()
	}
	pid, err := StartDaemon(name, bin, args, logPath)
	if err != nil {
		return err
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(pid)), 0o600); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Errorf("recording the PID of %s: %w", name, err)
	}
	var out string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		raw, _ := os.ReadFile(logPath)
		out = string(raw[min(offset, int64(len(raw))):])
		if strings.Contains(out, started) {
			return true, nil
		}
		if !processAlive(pid) {
			return false, errors.New("it exited")
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s did not start: %w\nits log, last lines:\n%s", name, err, lastLines(out, 15))
	}
	return nil
}
