package clusters

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// ClusterID reads a cluster's identity: the UID of its kube-system namespace. The primary ID is
// the primary's; a secondary's tells a duplicate registration and the primary's own context apart.
func ClusterID(ctx context.Context, c client.Reader) (string, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &ns); err != nil {
		return "", fmt.Errorf("reading the kube-system namespace (its UID is the cluster's ID): %w", err)
	}
	return string(ns.UID), nil
}

// RegistrationKey names the registration Secret.
func RegistrationKey() client.ObjectKey {
	return client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: flotillav1.KubeconfigSecretName}
}

// ReadRegistration reads the registration kubeconfig (empty when the Secret does not exist).
func ReadRegistration(ctx context.Context, c client.Reader) (*clientcmdapi.Config, error) {
	var secret corev1.Secret
	err := c.Get(ctx, RegistrationKey(), &secret)
	if apierrors.IsNotFound(err) {
		return clientcmdapi.NewConfig(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the registration Secret: %w", err)
	}
	cfg, err := clientcmd.Load(secret.Data[flotillav1.KubeconfigSecretKey])
	if err != nil {
		return nil, fmt.Errorf("the registration Secret %s/%s does not parse (fix or delete its key %s): %w",
			flotillav1.SystemNamespace, flotillav1.KubeconfigSecretName, flotillav1.KubeconfigSecretKey, err)
	}
	return cfg, nil
}

// Registration is what the registration Secret holds: the kubeconfig of the registered clusters,
// and the names of clusters removed on purpose (`flotillactl cluster remove`). A cluster whose
// context merely vanished from the kubeconfig is detached, not removed: its virtual node stays,
// cordoned and NotReady, and nothing of it is deleted; only a removed one is let go.
type Registration struct {
	Config  *clientcmdapi.Config
	Removed map[string]bool
	// Pinned maps cluster names to the identity (kube-system UID) `flotillactl cluster join` or
	// `add` found there with the operator's own credentials (AnnotationClusterIDs).
	Pinned map[string]string
	// StorageClasses maps cluster names to their storage class setting (AnnotationStorageClasses).
	StorageClasses map[string]string
	// Modes maps cluster names to how the manager reaches them (AnnotationModes).
	Modes map[string]string
}

// AnnotationClusterIDs is, on the registration Secret, the annotation that pins each cluster name to its identity, as
// "name=uid,name=uid". It lives with the registration rather than in the ClusterDetector's
// status because it is the operator's decision, not an observation of the manager: join and add
// write it (they read the UID with the operator's credentials in the same step that registers the
// context), join again is how a new identity is accepted, and a status is only what the manager
// saw last. A cluster registered without it (a context written by hand) is pinned to the ID its
// ClusterDetector recorded, else to the first ID it answers with.
const AnnotationClusterIDs = "flotilla.dev/cluster-ids"

// PinnedIDs reads the identities pinned in the registration Secret (AnnotationClusterIDs).
func PinnedIDs(secret *corev1.Secret) map[string]string {
	return namedValues(secret, AnnotationClusterIDs)
}

func setPinnedIDs(secret *corev1.Secret, pinned map[string]string) {
	setNamedValues(secret, AnnotationClusterIDs, pinned)
}

// AnnotationStorageClasses is, on the registration Secret, the StorageClass each secondary gives
// the real claims of claims of class flotilla, as "name=class,name=none": the operator's choice
// for that cluster (`cluster join` or `add --storage-class`). A cluster not named uses its
// default StorageClass; "none" takes no such claims (pods using them do not fit there).
const AnnotationStorageClasses = "flotilla.dev/storage-classes"

// AnnotationModes is, on the registration Secret, how the manager reaches each cluster, as
// "name=pull": a cluster in pull mode is dialled only through the tunnel its agent holds to the
// manager (pkg/tunnel), never at its kubeconfig's server, which may be an address only the
// cluster itself reaches; the kubeconfig's CA, server name and credentials still hold, end to
// end. A cluster not named is dialled directly.
const AnnotationModes = "flotilla.dev/cluster-modes"

// ModePull is the mode of a cluster reached through its agent's tunnel.
const ModePull = "pull"

// Modes reads how the manager reaches each cluster (AnnotationModes).
func Modes(secret *corev1.Secret) map[string]string {
	return namedValues(secret, AnnotationModes)
}

// StorageClassNone is the storage class setting of a cluster that takes no claims of class flotilla.
const StorageClassNone = "none"

// StorageClasses reads each cluster's storage class setting (AnnotationStorageClasses).
func StorageClasses(secret *corev1.Secret) map[string]string {
	return namedValues(secret, AnnotationStorageClasses)
}

// namedValues reads an annotation of "name=value" pairs separated by commas.
func namedValues(secret *corev1.Secret, key string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(secret.Annotations[key], ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && name != "" && v != "" {
			out[name] = v
		}
	}
	return out
}

// setNamedValues writes an annotation of "name=value" pairs, sorted; none removes it.
func setNamedValues(secret *corev1.Secret, key string, values map[string]string) {
	pairs := make([]string, 0, len(values))
	for name, v := range values {
		if name != "" && v != "" {
			pairs = append(pairs, name+"="+v)
		}
	}
	sort.Strings(pairs)
	if len(pairs) == 0 {
		delete(secret.Annotations, key)
		return
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[key] = strings.Join(pairs, ",")
}

// RemovedClusters reads the names of removed clusters from the registration Secret.
func RemovedClusters(secret *corev1.Secret) map[string]bool {
	out := map[string]bool{}
	for _, n := range strings.Split(secret.Annotations[flotillav1.AnnotationRemovedClusters], ",") {
		if n = strings.TrimSpace(n); n != "" {
			out[n] = true
		}
	}
	return out
}

func setRemovedClusters(secret *corev1.Secret, removed map[string]bool) {
	names := make([]string, 0, len(removed))
	for n, ok := range removed {
		if ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		delete(secret.Annotations, flotillav1.AnnotationRemovedClusters)
		return
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[flotillav1.AnnotationRemovedClusters] = strings.Join(names, ",")
}

// UpdateRegistration is the one read-modify-write of the registration Secret (the CLI's join, add
// and remove, the manager's token renewal): it applies mutate to the registration and writes it
// back, creating the Secret when missing (its namespace must exist) and retrying on conflicts, so
// two writers never lose each other's change.
func UpdateRegistration(ctx context.Context, c client.Client, mutate func(*Registration) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var secret corev1.Secret
		err := c.Get(ctx, RegistrationKey(), &secret)
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return fmt.Errorf("reading the registration Secret: %w", err)
		}
		reg := &Registration{Config: clientcmdapi.NewConfig(), Removed: RemovedClusters(&secret), Pinned: PinnedIDs(&secret),
			StorageClasses: StorageClasses(&secret), Modes: Modes(&secret)}
		if !create && len(secret.Data[flotillav1.KubeconfigSecretKey]) > 0 {
			if reg.Config, err = clientcmd.Load(secret.Data[flotillav1.KubeconfigSecretKey]); err != nil {
				return fmt.Errorf("the registration Secret does not parse: %w", err)
			}
		}
		if err := mutate(reg); err != nil {
			return err
		}
		raw, err := clientcmd.Write(*reg.Config)
		if err != nil {
			return fmt.Errorf("encoding the registration kubeconfig: %w", err)
		}
		if create {
			secret = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: flotillav1.KubeconfigSecretName,
					Labels: map[string]string{"app.kubernetes.io/part-of": "flotilla"}},
				Type: corev1.SecretTypeOpaque,
			}
		}
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[flotillav1.KubeconfigSecretKey] = raw
		setRemovedClusters(&secret, reg.Removed)
		setPinnedIDs(&secret, reg.Pinned)
		setNamedValues(&secret, AnnotationStorageClasses, reg.StorageClasses)
		setNamedValues(&secret, AnnotationModes, reg.Modes)
		if create {
			return c.Create(ctx, &secret)
		}
		return c.Update(ctx, &secret)
	})
}

// SecretTokenRenewer returns a TokenRenewer that writes a renewed token into the registration
// Secret (the user entry of the given context).
func SecretTokenRenewer(c client.Client) TokenRenewer {
	return func(ctx context.Context, contextName, token string) error {
		return UpdateRegistration(ctx, c, func(reg *Registration) error {
			cfg := reg.Config
			kctx, ok := cfg.Contexts[contextName]
			if !ok || cfg.AuthInfos[kctx.AuthInfo] == nil {
				return fmt.Errorf("context %q is no longer registered", contextName)
			}
			cfg.AuthInfos[kctx.AuthInfo].Token = token
			return nil
		})
	}
}

// Primary is what the manager learns of the primary at start.
type Primary struct {
	// ID is the UID of its kube-system namespace.
	ID string
	// Version is its API server's version.
	Version string
	// KnownIDs maps the names of clusters an earlier run recorded (ClusterDetector status) to
	// their IDs, so a secondary that is down now keeps its virtual node and shows NotReady.
	KnownIDs map[string]string
}

// ReadPrimary reads the primary's identity, version and the cluster IDs recorded before.
func ReadPrimary(ctx context.Context, c client.Reader, versions discovery.ServerVersionInterface) (Primary, error) {
	id, err := ClusterID(ctx, c)
	if err != nil {
		return Primary{}, err
	}
	v, err := versions.ServerVersion()
	if err != nil {
		return Primary{}, fmt.Errorf("reading the primary's version: %w", err)
	}
	var detectors flotillav1.ClusterDetectorList
	if err := c.List(ctx, &detectors, client.InNamespace(flotillav1.SystemNamespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return Primary{}, fmt.Errorf("the flotilla.dev CRDs are not installed in the primary (install the chart, or apply config/crd/bases): %w", err)
		}
		return Primary{}, fmt.Errorf("listing ClusterDetectors: %w", err)
	}
	known := make(map[string]string, len(detectors.Items))
	for _, d := range detectors.Items {
		known[d.Name] = d.Status.ClusterID
	}
	return Primary{ID: id, Version: v.GitVersion, KnownIDs: known}, nil
}
