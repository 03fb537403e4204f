package testbed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/scheme"
)

// A cluster's storage, written directly: a spec that needs a cluster holding tens of thousands of
// pods (what Flotilla lists and watches) gets them in seconds, where the API server takes about
// 390 creations a second on this kind of machine and deletes a collection one pod at a time. The
// API server sees each write through its watch on etcd, as it sees its own, so its clients see
// the pods come and go as usual. Only objects no admission needs to see are written this way.

// etcdOf opens a client of c's etcd, with the API server's key prefix, both read from the
// kube-apiserver's command line (--etcd-servers, --etcd-prefix).
func (b *Bed) etcdOf(c *Cluster) (*clientv3.Client, string, error) {
	pid, err := b.APIServerPID(c)
	if err != nil {
		return nil, "", err
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, "", fmt.Errorf("reading the kube-apiserver's command line of %s: %w", c.Name, err)
	}
	var servers []string
	prefix := "/registry"
	for _, arg := range strings.Split(string(raw), "\x00") {
		if v, ok := strings.CutPrefix(arg, "--etcd-servers="); ok {
			servers = strings.Split(v, ",")
		}
		if v, ok := strings.CutPrefix(arg, "--etcd-prefix="); ok {
			prefix = v
		}
	}
	if len(servers) == 0 {
		return nil, "", fmt.Errorf("the kube-apiserver of %s has no --etcd-servers", c.Name)
	}
	for _, s := range servers {
		if !strings.HasPrefix(s, "http://") {
			return nil, "", fmt.Errorf("the etcd of %s is at %s: only a plain-HTTP etcd on this machine is written directly", c.Name, s)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: servers, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to the etcd of %s: %w", c.Name, err)
	}
	return cli, prefix, nil
}

// StorePods writes n pods named name(i) into namespace of c, bound to node, straight into its
// etcd (the namespace must exist): each a container of image busybox, created now with a new UID.
func (b *Bed) StorePods(ctx context.Context, c *Cluster, namespace, node string, n int, name func(i int) string) error {
	now := metav1.Now()
	return b.store(ctx, c, "pods", namespace, n, func(i int) runtime.Object {
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name(i), UID: types.UID(uuid.NewUUID()), CreationTimestamp: now},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox",
				TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullAlways}},
				RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: corev1.DefaultSchedulerName},
			Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
		}
	})
}

// StoredServices is where an API server keeps Services in etcd (DeleteStored's resource).
const StoredServices = "services/specs"

// StoreServices writes n headless Services named name(i) into namespace of c, straight into its
// etcd (the namespace must exist): each with one port and the annotation kubectl apply leaves
// (about 1 KiB), created now with a new UID. Headless: no cluster IP to allocate. No selector:
// with one, the cluster's EndpointSlice controller writes a slice for each, 20,000 writes that
// kept it busy minutes after the Services were gone, and a later spec's Service waited for its
// endpoints all that time.
func (b *Bed) StoreServices(ctx context.Context, c *Cluster, namespace string, n int, name func(i int) string) error {
	now := metav1.Now()
	return b.store(ctx, c, StoredServices, namespace, n, func(i int) runtime.Object {
		svc := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name(i), UID: types.UID(uuid.NewUUID()), CreationTimestamp: now},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone},
				SessionAffinity: corev1.ServiceAffinityNone,
				Ports:           []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
		}
		svc.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: strings.Repeat("x", 1024)}
		return svc
	})
}

// store writes n objects of a resource into namespace of c, straight into its etcd, in
// transactions of at most 128 (etcd's --max-txn-ops default).
func (b *Bed) store(ctx context.Context, c *Cluster, resource, namespace string, n int, object func(i int) runtime.Object) error {
	cli, prefix, err := b.etcdOf(c)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	enc := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	const batch = 128
	for start := 0; start < n; start += batch {
		var ops []clientv3.Op
		for i := start; i < min(n, start+batch); i++ {
			obj := object(i)
			var buf bytes.Buffer
			if err := enc.Encode(obj, &buf); err != nil {
				return fmt.Errorf("encoding %s %d: %w", resource, i, err)
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				return err
			}
			ops = append(ops, clientv3.OpPut(path.Join(prefix, resource, namespace, m.GetName()), buf.String()))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("writing %s %d to %d into the etcd of %s: %w", resource, start, start+len(ops)-1, c.Name, err)
		}
	}
	return nil
}

// DeleteStoredPods deletes every pod of namespace in c straight from its etcd, at once, and says
// how many there were.
func (b *Bed) DeleteStoredPods(ctx context.Context, c *Cluster, namespace string) (int64, error) {
	return b.DeleteStored(ctx, c, "pods", namespace)
}

// DeleteStored deletes every object of a resource (its etcd path: "pods", StoredServices) in
// namespace of c straight from its etcd, at once, and says how many there were.
func (b *Bed) DeleteStored(ctx context.Context, c *Cluster, resource, namespace string) (int64, error) {
	cli, prefix, err := b.etcdOf(c)
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.Delete(ctx, path.Join(prefix, resource, namespace)+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("deleting the %s of %s/%s from its etcd: %w", resource, c.Name, namespace, err)
	}
	return resp.Deleted, nil
}
