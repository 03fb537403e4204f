package testbed

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The provisioner's files as the bed renders them: every node's volumes under the cluster's
// volumes dir, helper pods of the application image that real nodes can run.
func TestLocalPathFiles(t *testing.T) {
	clusterDir := "/w/kwok/clusters/secondary1"
	files, data, err := localPathFiles(clusterDir)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		NodePathMap []struct {
			Node  string   `json:"node"`
			Paths []string `json:"paths"`
		} `json:"nodePathMap"`
	}
	if err := json.Unmarshal(files["config.json"], &cfg); err != nil {
		t.Fatalf("config.json: %v\n%s", err, files["config.json"])
	}
	if len(cfg.NodePathMap) != 1 || cfg.NodePathMap[0].Node != localPathAllNodes ||
		len(cfg.NodePathMap[0].Paths) != 1 || cfg.NodePathMap[0].Paths[0] != "/w/kwok/clusters/secondary1/volumes" {
		t.Errorf("config.json: every node's volumes should be in the cluster's volumes dir:\n%s", files["config.json"])
	}
	if (&Cluster{dir: clusterDir}).VolumesDir() != cfg.NodePathMap[0].Paths[0] {
		t.Errorf("VolumesDir %s is not the configured path", (&Cluster{dir: clusterDir}).VolumesDir())
	}

	// Decoded as the provisioner decodes it (YAML to JSON to a Pod).
	var pod corev1.Pod
	if err := yaml.Unmarshal(files["helperPod.yaml"], &pod); err != nil {
		t.Fatalf("helperPod.yaml: %v\n%s", err, files["helperPod.yaml"])
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("helperPod.yaml has %d containers:\n%s", len(pod.Spec.Containers), files["helperPod.yaml"])
	}
	c := pod.Spec.Containers[0]
	// The provisioner reads the helper's log from a container of this name.
	if c.Name != "helper-pod" || c.Image != TestAppImage || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("helper container %s, image %s, pull %s; want helper-pod, %s, Never", c.Name, c.Image, c.ImagePullPolicy, TestAppImage)
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("the helper must run as root (the volumes' parent belongs to root): %+v", pod.Spec.SecurityContext)
	}
	tolerated := false
	for _, tol := range pod.Spec.Tolerations {
		tolerated = tolerated || (tol.Key == RealNodeKey && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoSchedule)
	}
	if !tolerated {
		t.Errorf("the helper does not tolerate the real node's taint: %+v", pod.Spec.Tolerations)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the helper gets a ServiceAccount token it has no use for")
	}

	for key, want := range map[string]string{"setup": `mkdir -m 0777 -p "$VOL_DIR"`, "teardown": `rm -rf "$VOL_DIR"`} {
		if strings.TrimSpace(data[key]) != want {
			t.Errorf("ConfigMap %s = %q, want %q", key, data[key], want)
		}
	}
	for name, raw := range files {
		if data[name] != string(raw) {
			t.Errorf("the ConfigMap's %s differs from the file the provisioner reads", name)
		}
	}
}

func TestLocalPathStorageClassIsTheDefault(t *testing.T) {
	sc := localPathStorageClass()
	if sc.Name != StorageClassLocalPath || sc.Provisioner != LocalPathProvisioner ||
		sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
		t.Errorf("class %s, provisioner %s, annotations %v", sc.Name, sc.Provisioner, sc.Annotations)
	}
	if *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		t.Errorf("binding %s, reclaim %s, expansion %v", *sc.VolumeBindingMode, *sc.ReclaimPolicy, sc.AllowVolumeExpansion)
	}
}

// `make tools` builds the provisioner under the name the bed runs and ToolsDir checks.
func TestLocalPathProvisionerIsBuiltByMakeTools(t *testing.T) {
	version, err := toolVersion(localPathVersionKey)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "tools", "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	want := `"` + localPathName + `-$` + localPathVersionKey + `=`
	if !strings.Contains(string(raw), want) || !strings.HasPrefix(version, "v") {
		t.Errorf("install.sh does not build %s (version %s)", want, version)
	}
}

// checkLocalPathVolume proves a secondary's StorageClassLocalPath on its real node: a claim used by
// a pod there is provisioned as a directory under VolumesDir (by a helper pod of the application
// image), holds what one pod wrote for the next to read, may grow its request (its capacity stays),
// and goes with its directory once deleted (the teardown helper pod). A claim used on a fake node
// binds too, kwok completing its helper pods, with no directory. It returns the directory of a
// volume it leaves in place, for the bed's Stop to remove.
func checkLocalPathVolume(t *testing.T, c *Cluster) string {
	ctx := t.Context()
	cs := c.Clientset
	node := c.RealNode.Name
	sc, err := cs.StorageV1().StorageClasses().Get(ctx, StorageClassLocalPath, metav1.GetOptions{})
	if err != nil || sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
		t.Fatalf("StorageClass %s in %s: %v %+v", StorageClassLocalPath, c.Name, err, sc)
	}
	const ns = "volumes"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := func(name string, class *string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: class,
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	podUsing := func(name, claimName, script string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  map[string]string{RealNodeKey: "true"},
				Tolerations:   []corev1.Toleration{{Key: RealNodeKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				Containers: []corev1.Container{{Name: "app", Image: TestAppImage, ImagePullPolicy: corev1.PullNever,
					Command: []string{"sh", "-c", script}, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}},
			},
		}
	}
	createPod := func(p *corev1.Pod) {
		t.Helper()
		// The namespace's default ServiceAccount may not exist yet.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("creating pod %s: %v", p.Name, err)
		}
	}
	done := func(name string) *corev1.Pod {
		t.Helper()
		var got *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got = p
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
		})
		if err != nil || got == nil || got.Status.Phase != corev1.PodSucceeded {
			logs, _ := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			raw, _ := os.ReadFile(filepath.Join(c.dir, "logs", localPathName+".log"))
			t.Fatalf("pod %s did not succeed: %v (%+v) %q\nprovisioner log:\n%s", name, err, got, logs, lastLines(string(raw), 30))
		}
		return got
	}
	deletePods := func(names ...string) {
		t.Helper()
		for _, name := range names {
			if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, nil
		})
		if err != nil {
			t.Fatalf("pods %v not gone: %v", names, err)
		}
	}
	// deleteClaim deletes a claim and waits until its volume is gone too.
	deleteClaim := func(name, pv string) time.Duration {
		t.Helper()
		start := time.Now()
		if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			raw, _ := os.ReadFile(filepath.Join(c.dir, "logs", localPathName+".log"))
			t.Fatalf("PV %s of claim %s not deleted: %v\nprovisioner log:\n%s", pv, name, err, lastLines(string(raw), 30))
		}
		return time.Since(start)
	}

	// On the real node: a pod writes, another reads.
	start := time.Now()
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("data", ptr.To(StorageClassLocalPath)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(podUsing("writer", "data", "echo hello > /data/f"))
	done("writer")
	t.Logf("claim and writer pod created -> writer Succeeded on %s in %s", node, time.Since(start).Round(100*time.Millisecond))
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim not Bound: %v %+v", err, pvc.Status)
	}
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := pv.Spec.NodeAffinity; a == nil || a.Required == nil || len(a.Required.NodeSelectorTerms) != 1 ||
		len(a.Required.NodeSelectorTerms[0].MatchExpressions) != 1 ||
		a.Required.NodeSelectorTerms[0].MatchExpressions[0].Key != "kubernetes.io/hostname" ||
		len(a.Required.NodeSelectorTerms[0].MatchExpressions[0].Values) != 1 ||
		a.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != node {
		t.Errorf("PV %s: node affinity %+v, want %s", pv.Name, pv.Spec.NodeAffinity, node)
	}
	if pv.Spec.HostPath == nil || filepath.Dir(pv.Spec.HostPath.Path) != c.VolumesDir() {
		t.Fatalf("PV %s is not a directory of %s: %+v", pv.Name, c.VolumesDir(), pv.Spec.PersistentVolumeSource)
	}
	dir := pv.Spec.HostPath.Path
	if raw, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(raw) != "hello\n" {
		t.Errorf("%s/f on the host: %q %v", dir, raw, err)
	}
	start = time.Now()
	createPod(podUsing("reader", "data", "cat /data/f"))
	done("reader")
	t.Logf("reader pod created -> Succeeded in %s", time.Since(start).Round(100*time.Millisecond))
	logs, err := cs.CoreV1().Pods(ns).GetLogs("reader", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || string(logs) != "hello\n" {
		t.Errorf("reader printed %q (%v), want hello", logs, err)
	}

	// Expansion: the class allows it, so the request grows; nothing resizes a local-path volume,
	// so its capacity stays.
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("growing the claim's request: %v", err)
	}
	var reasons []string
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=data"})
		if err != nil {
			return false, nil
		}
		reasons = reasons[:0]
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason+": "+e.Message)
		}
		return strings.Contains(strings.Join(reasons, "\n"), "ExternalExpanding"), nil
	})
	pvc, err = cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pvc.Status.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("capacity %s after growing the request: something resized a local-path volume", got.String())
	}
	t.Logf("request grown to %s, capacity %s, conditions %+v, events:\n%s", pvc.Spec.Resources.Requests.Storage(),
		pvc.Status.Capacity.Storage(), pvc.Status.Conditions, strings.Join(reasons, "\n"))

	deletePods("writer", "reader")
	took := deleteClaim("data", pv.Name)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after its PV was deleted: %v", dir, err)
	}
	t.Logf("claim deleted -> PV and %s gone in %s", filepath.Base(dir), took.Round(100*time.Millisecond))

	// On a fake node: the claim binds (kwok completes the helper pods), nothing is written.
	fake := podUsing("fake", "fake-data", "true")
	fake.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": c.Nodes[0]}
	fake.Spec.Tolerations = nil
	start = time.Now()
	created, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("fake-data", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.StorageClassName == nil || *created.Spec.StorageClassName != StorageClassLocalPath {
		t.Errorf("a claim without a class got %v, not the default %s", created.Spec.StorageClassName, StorageClassLocalPath)
	}
	createPod(fake)
	var fakePV string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "fake-data", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		fakePV = p.Spec.VolumeName
		return p.Status.Phase == corev1.ClaimBound, nil
	})
	if err != nil {
		t.Fatalf("a claim used on fake node %s not Bound: %v", c.Nodes[0], err)
	}
	t.Logf("on fake node %s: claim Bound in %s", c.Nodes[0], time.Since(start).Round(100*time.Millisecond))
	if pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, fakePV, metav1.GetOptions{}); err == nil && pv.Spec.HostPath != nil {
		if _, err := os.Stat(pv.Spec.HostPath.Path); !os.IsNotExist(err) {
			t.Errorf("a fake node's volume %s exists on the host: %v", pv.Spec.HostPath.Path, err)
		}
	}
	deletePods("fake")
	took = deleteClaim("fake-data", fakePV)
	t.Logf("on fake node %s: claim deleted -> PV gone in %s", c.Nodes[0], took.Round(100*time.Millisecond))

	// A volume left in place, for the bed's Stop to remove (root's directory, the app's file).
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("kept", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(podUsing("keeper", "kept", "echo kept > /data/f"))
	done("keeper")
	pvc, err = cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RSS of the local-path-provisioner of %s: %s", c.Name, rss(readPIDFile(localPathPIDFile(c.dir))))
	kept := filepath.Join(c.VolumesDir(), pvc.Spec.VolumeName+"_"+ns+"_kept")
	if raw, err := os.ReadFile(filepath.Join(kept, "f")); err != nil || string(raw) != "kept\n" {
		t.Fatalf("%s/f: %q %v", kept, raw, err)
	}
	return kept
}
