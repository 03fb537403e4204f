package testbed

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-dev/flotilla/pkg/placement"
)

// NodeSize is the capacity of each fake node.
type NodeSize struct {
	CPU    string // default "32"
	Memory string // default "256Gi"
	Pods   string // default "500"
}

func (n *NodeSize) defaults() {
	if n.CPU == "" {
		n.CPU = "32"
	}
	if n.Memory == "" {
		n.Memory = "256Gi"
	}
	if n.Pods == "" {
		n.Pods = "500"
	}
}

func (n NodeSize) resources() (corev1.ResourceList, error) {
	list := corev1.ResourceList{}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: n.CPU, corev1.ResourceMemory: n.Memory, corev1.ResourcePods: n.Pods} {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("node %s %q: %w", name, v, err)
		}
		list[name] = q
	}
	return list, nil
}

// Region is the topology.kubernetes.io/region label of a cluster's fake nodes; zones are
// <region>-a, <region>-b, ... one per node in turn.
func Region(cluster string) string { return "region-" + cluster }

// fakeNode describes the i-th (0-based) fake node of a cluster, as the scheduler and Flotilla read it.
func fakeNode(cluster string, i int, size corev1.ResourceList) *corev1.Node {
	name := fmt.Sprintf("%s-node-%d", cluster, i)
	zone := fmt.Sprintf("%s-%c", Region(cluster), 'a'+rune(i%26))
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			// kwok serves its emulated resource metrics at a path per node (metrics.go).
			Annotations: map[string]string{FakeNodeAnnotation: "fake", resourceMetricsPath: "/metrics/nodes/" + name + "/metrics/resource"},
			Labels: map[string]string{
				"type":                             "kwok",
				"kubernetes.io/hostname":           name,
				"kubernetes.io/os":                 "linux",
				"kubernetes.io/arch":               "amd64",
				"node.kubernetes.io/instance-type": "kwok-fake",
				"topology.kubernetes.io/region":    Region(cluster),
				"topology.kubernetes.io/zone":      zone,
			},
		},
		Status: corev1.NodeStatus{Capacity: size, Allocatable: size},
	}
}

func createFakeNodes(ctx context.Context, c *Cluster, n int, size NodeSize) error {
	res, err := size.resources()
	if err != nil {
		return err
	}
	for i := range n {
		node := fakeNode(c.Name, i, res)
		_, err := c.Clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating fake node %s: %w", node.Name, err)
		}
		c.Nodes = append(c.Nodes, node.Name)
	}
	return nil
}

// waitReady waits until the API server answers /readyz.
func waitReady(ctx context.Context, c *Cluster) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, last = c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s /readyz: %w (last: %w)", c.Name, err, last)
	}
	return nil
}

// waitNodesReady waits until every fake node of the cluster is Ready.
func waitNodesReady(ctx context.Context, c *Cluster) error {
	notReady := c.Nodes
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var still []string
		for _, name := range c.Nodes {
			n, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !NodeReady(n) {
				still = append(still, name)
			}
		}
		notReady = still
		return len(still) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for nodes %v of %s to be Ready: %w", notReady, c.Name, err)
	}
	return nil
}

// NodeReady says whether a node's Ready condition is True.
func NodeReady(n *corev1.Node) bool { return placement.NodeReady(n) }

// WaitWorking waits until a cluster's controllers work again, not only its API server: a new
// namespace gets its default ServiceAccount (kube-controller-manager) and a pod is scheduled
// and Running (kube-scheduler, kwok). After a restart or a freeze their informers may back off
// for up to a minute before they see new objects; a test that goes on at once would find a
// secondary that answers but does nothing.
func WaitWorking(ctx context.Context, c *Cluster) error {
	ns := fmt.Sprintf("bed-probe-%d", time.Now().UnixNano())
	cs := c.Clientset.CoreV1()
	if _, err := cs.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating probe namespace in %s: %w", c.Name, err)
	}
	defer func() { _ = cs.Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{}) }()
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if _, err := cs.ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = "no default ServiceAccount yet"
			return false, nil
		}
		p, err := cs.Pods(ns).Get(ctx, "probe", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cs.Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "busybox"}}}}, metav1.CreateOptions{})
			last = "probe pod created"
			if err != nil {
				last = "creating the probe pod: " + err.Error()
			}
			return false, nil
		}
		if err != nil {
			return false, nil
		}
		last = fmt.Sprintf("probe pod %s on %q", p.Status.Phase, p.Spec.NodeName)
		return p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the controllers of %s to work: %w (last: %s)", c.Name, err, last)
	}
	return nil
}

// ExtraNodes are fake nodes a test adds to a cluster for a while (accelerator nodes, say): Count
// nodes named <Prefix>-<i>, each with the cluster's usual labels, these Labels and Taints, and
// Resources beside the default size's CPU, memory and pods.
type ExtraNodes struct {
	Prefix    string
	Count     int
	Resources corev1.ResourceList
	Labels    map[string]string
	Taints    []corev1.Taint
}

// AddNodes creates the extra fake nodes in c and waits until kwok has them Ready; it returns
// their names. DeleteNodes removes them.
func AddNodes(ctx context.Context, c *Cluster, x ExtraNodes) ([]string, error) {
	var size NodeSize
	size.defaults()
	res, err := size.resources()
	if err != nil {
		return nil, err
	}
	for k, v := range x.Resources {
		res[k] = v
	}
	var names []string
	for i := range x.Count {
		n := fakeNode(c.Name, i, res)
		n.Name = fmt.Sprintf("%s-%d", x.Prefix, i)
		n.Labels[corev1.LabelHostname] = n.Name
		n.Annotations[resourceMetricsPath] = "/metrics/nodes/" + n.Name + "/metrics/resource"
		for k, v := range x.Labels {
			n.Labels[k] = v
		}
		n.Spec.Taints = x.Taints
		if _, err := c.Clientset.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return names, fmt.Errorf("creating node %s in %s: %w", n.Name, c.Name, err)
		}
		names = append(names, n.Name)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			n, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !NodeReady(n) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return names, fmt.Errorf("nodes %v in %s not Ready: %w", names, c.Name, err)
	}
	return names, nil
}

// DeleteNodes deletes nodes a test added and waits until they are gone (the pods still bound to
// them are the caller's).
func DeleteNodes(ctx context.Context, c *Cluster, names []string) error {
	for _, name := range names {
		if err := c.Clientset.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting node %s in %s: %w", name, c.Name, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			if _, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
}
