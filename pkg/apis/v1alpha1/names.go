package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Labels, annotations and names Flotilla sets and reads.
const (
	// SystemNamespace is where the manager, its Secret and the ClusterDetectors live.
	SystemNamespace = "flotilla-system"
	// KubeconfigSecretName is the Secret (in SystemNamespace) whose key KubeconfigSecretKey holds a
	// kubeconfig with one context per registered cluster.
	KubeconfigSecretName = "kubeconfig"
	// KubeconfigSecretKey is the key of the kubeconfig in that Secret.
	KubeconfigSecretKey = "config"
	// DefaultNamePrefix is the chart's fullname unless its fullnameOverride sets another: each
	// object of the manager's own in its cluster is named from it (InstallNames). The names other
	// clusters and users rely on (the registration Secret, the StorageClass, a pulled secondary's
	// agent Secret, the ServiceAccounts join makes) never change.
	DefaultNamePrefix = "flotilla"
	// AnnotationNamePrefix, on the manager's Deployment (the chart's), is the prefix its objects
	// are named from: how flotillactl finds them.
	AnnotationNamePrefix = "flotilla.dev/name-prefix"
	// SealSecretName is the Secret (in SystemNamespace) holding the key of the admission seal
	// (pkg/seal): only the manager reads it.
	SealSecretName = DefaultNamePrefix + "-admission-seal"
	// WebhookCASecretName is the Secret (in SystemNamespace) holding the CA of the webhook's
	// self-issued serving certificates.
	WebhookCASecretName = DefaultNamePrefix + "-webhook-ca"
	// WebhookCertificateName is the chart's cert-manager Certificate of the webhook (in
	// SystemNamespace; webhook.certManager.enabled), and WebhookTLSSecretName its Secret.
	WebhookCertificateName = DefaultNamePrefix + "-webhook"
	WebhookTLSSecretName   = DefaultNamePrefix + "-webhook-tls"
	// WebhookConfigurationName names the MutatingWebhookConfiguration the manager owns (its pod,
	// DaemonSet and Replicator webhooks): the manager writes it at start, flotillactl doctor checks
	// that it is there, and uninstall deletes it.
	WebhookConfigurationName = DefaultNamePrefix
	// AnnotationInjectCAFrom is cert-manager's CA injector annotation, set on that configuration
	// when cert-manager serves the webhook: the caBundle of every webhook in it is the CA of the
	// named Certificate's Secret.
	AnnotationInjectCAFrom = "cert-manager.io/inject-ca-from"
	// ManagerLeaseName is the manager's leader-election Lease (in its namespace).
	ManagerLeaseName = DefaultNamePrefix + "-manager.flotilla.dev"
	// ManagerDeploymentName is the chart's Deployment of the manager.
	ManagerDeploymentName = DefaultNamePrefix + "-manager"
	// AnnotationRemovedClusters, on that Secret, lists (comma-separated) the clusters removed on
	// purpose by `flotillactl cluster remove`; a context that merely vanished is not in it.
	AnnotationRemovedClusters = "flotilla.dev/removed-clusters"
	// TaintUnregistered cordons the virtual node of a secondary whose context left the
	// registration without being removed: no new proxy goes there, running ones stay.
	TaintUnregistered = "flotilla.dev/unregistered"

	// LabelRole says whether a ClusterDetector is the primary's or a secondary's.
	LabelRole = "app.kubernetes.io/role"
	// RolePrimary and RoleSecondary are the values of LabelRole.
	RolePrimary   = "primary"
	RoleSecondary = "secondary"

	// LabelCluster names the cluster a virtual node (or ClusterDetector) stands for.
	LabelCluster = "flotilla.dev/cluster"
	// LabelPrimary carries the primary ID on everything Flotilla creates in a secondary.
	LabelPrimary = "flotilla.dev/primary"
	// LabelManagedBy marks a secondary's namespace as writable by the primary whose ID it holds.
	LabelManagedBy = "flotilla.dev/managed-by"
	// LabelAllowance marks a secondary's namespace whose ResourceQuota AllowanceQuotaName holds
	// the primary whose ID it holds to its PrimaryAllowance: set by the secondary's lender once
	// that quota is in force, never by the primary (the fence refuses it), and required on a
	// namespace before the primary may create a workload there while an allowance exists.
	LabelAllowance = "flotilla.dev/allowance"
	// AllowanceQuotaName is the ResourceQuota the lender writes in each namespace of a primary
	// that has a PrimaryAllowance.
	AllowanceQuotaName = "flotilla-allowance"
	// AnnotationAllowanceWanted, on a secondary's namespace, is when the primary managing it was
	// last refused there for want of room in its allowance (RFC 3339): the lender gives the room
	// that is free to the namespaces that want it.
	AnnotationAllowanceWanted = "flotilla.dev/allowance-wanted"
	// AnnotationOverrides, on what Flotilla sends to a secondary (a delegate, a Replicator's
	// copy), names the Override and ClusterOverride rules that changed it for that cluster.
	AnnotationOverrides = "flotilla.dev/overrides"
	// AllowanceFinalizer keeps a PrimaryAllowance until the lender has removed its quotas.
	AllowanceFinalizer = "flotilla.dev/allowance"
	// LabelOS, LabelArch, LabelRegion and LabelZone describe a secondary on its virtual node
	// (the standard kubernetes.io/os|arch and topology keys are deliberately not used).
	LabelOS     = "flotilla.dev/os"
	LabelArch   = "flotilla.dev/arch"
	LabelRegion = "flotilla.dev/region"
	LabelZone   = "flotilla.dev/zone"

	// LabelNodeType and NodeTypeVirtualKubelet mark virtual nodes, as every virtual-kubelet does.
	LabelNodeType          = "type"
	NodeTypeVirtualKubelet = "virtual-kubelet"

	// VirtualNodePrefix starts every virtual node's name: flotilla-<cluster name>.
	VirtualNodePrefix = "flotilla-"
	// TaintVirtualNode keeps pods that do not tolerate it off virtual nodes.
	TaintVirtualNode = "virtual-kubelet.io/provider"
	// TaintVirtualNodeValue is that taint's value.
	TaintVirtualNodeValue = "flotilla"
)

// Replication: labels and annotations on what a Replicator applies.
const (
	// LabelReplicator names the Replicator that applied an object (in every cluster).
	LabelReplicator = "flotilla.dev/replicator"
	// AnnotationCreatedBy marks a namespace a Replicator created: <primary id>/<replicator uid>.
	AnnotationCreatedBy = "flotilla.dev/created-by"
	// AnnotationOwner says which part of Flotilla owns an object: reflect, or replicator/<name>.
	AnnotationOwner = "flotilla.dev/owner"
	// OwnerReflect is the AnnotationOwner value of dependency copies (a Replicator's is replicator/<name>).
	OwnerReflect = "reflect"
	// OwnerReplicatorPrefix starts the AnnotationOwner value of what a Replicator applies.
	OwnerReplicatorPrefix = "replicator/"
	// AnnotationKeepServiceType keeps a copied Service's type (NodePort, LoadBalancer) instead of ClusterIP.
	AnnotationKeepServiceType = "flotilla.dev/keep-service-type"
	// FinalizerReplicator keeps a Replicator until what it applied is removed everywhere.
	FinalizerReplicator = "flotilla.dev/replicator"
	// FieldManagerReflection is the server-side apply field manager of dependency copies.
	FieldManagerReflection = "flotilla-reflection"
	// FieldManagerReplicator is the server-side apply field manager of what a Replicator applies.
	// Two managers let the API server say whose a copy is: neither writer takes over, overwrites
	// or deletes what the other holds.
	FieldManagerReplicator = "flotilla-replicator"
)

// ReplicatorCASecretPrefix starts the name of every Replicator's CA Secret in SystemNamespace. The
// manager's own Secrets there (KubeconfigSecretName, the webhook's CA) never start with it, so no
// Replicator name can make one collide with them.
const ReplicatorCASecretPrefix = "replicator-ca."

// ReplicatorCASecretName names the Secret holding a Replicator's CA (and its key), in
// SystemNamespace of the primary only. Names too long for a Secret keep a hash of the rest.
func ReplicatorCASecretName(replicator string) string {
	name := ReplicatorCASecretPrefix + replicator
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(replicator))
	return name[:253-9] + "-" + hex.EncodeToString(sum[:4])
}

// DeviceResourcePrefix names, on a virtual node's capacity and allocatable, a secondary's devices
// of one DeviceClass (Dynamic Resource Allocation): devices.flotilla.dev/<class>, total and free.
const DeviceResourcePrefix = "devices.flotilla.dev/"

// VirtualNodeName is the name of the virtual node of a cluster.
func VirtualNodeName(cluster string) string { return VirtualNodePrefix + cluster }

// ClusterOfNode is the cluster whose virtual node a node name names; ok is false for a node
// that is no virtual node (a real node of the primary, or none: "").
func ClusterOfNode(nodeName string) (cluster string, ok bool) {
	cluster, ok = strings.CutPrefix(nodeName, VirtualNodePrefix)
	return cluster, ok && cluster != ""
}

// VirtualNodeExclusion is the node-affinity requirement that keeps a pod off every virtual node:
// the DaemonSet webhook adds it to every required term of a DaemonSet's pod template, and
// flotillactl doctor gives it as the fix for a DaemonSet that can reach virtual nodes. A function,
// so that no caller can change what the others get.
func VirtualNodeExclusion() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{
		Key: LabelNodeType, Operator: corev1.NodeSelectorOpNotIn, Values: []string{NodeTypeVirtualKubelet},
	}
}

// InstallNames are the names of the manager's own objects in its cluster, each made from one
// prefix: the chart's fullname (fullnameOverride), given to the manager as --name-prefix and
// recorded on its Deployment (AnnotationNamePrefix). All are in SystemNamespace but the
// MutatingWebhookConfiguration.
// +kubebuilder:object:generate=false
type InstallNames struct {
	Prefix string
	// WebhookConfiguration is the MutatingWebhookConfiguration the manager writes: the prefix.
	WebhookConfiguration string
	// WebhookService and MetricsService are the Services of the webhook and of the metrics.
	WebhookService, MetricsService string
	// WebhookCASecret holds the manager's CA (key included); CAConfigMap publishes its certificate.
	WebhookCASecret, CAConfigMap string
	// WebhookCertificate is the chart's cert-manager Certificate and WebhookTLSSecret its Secret.
	WebhookCertificate, WebhookTLSSecret string
	// SealSecret holds the admission seal's key.
	SealSecret string
	// ManagerDeployment and ManagerLease are the manager's Deployment and leader-election Lease.
	ManagerDeployment, ManagerLease string
	// LenderLease is the lender's leader-election Lease (in a secondary).
	LenderLease string
}

// NamesFrom returns the names made from prefix ("" is DefaultNamePrefix).
func NamesFrom(prefix string) InstallNames {
	if prefix == "" {
		prefix = DefaultNamePrefix
	}
	return InstallNames{
		Prefix:               prefix,
		WebhookConfiguration: prefix,
		WebhookService:       prefix + "-webhook",
		MetricsService:       prefix + "-manager-metrics",
		WebhookCASecret:      prefix + "-webhook-ca",
		CAConfigMap:          prefix + "-ca",
		WebhookCertificate:   prefix + "-webhook",
		WebhookTLSSecret:     prefix + "-webhook-tls",
		SealSecret:           prefix + "-admission-seal",
		ManagerDeployment:    prefix + "-manager",
		ManagerLease:         prefix + "-manager.flotilla.dev",
		LenderLease:          prefix + "-lender.flotilla.dev",
	}
}

// Pod election: annotations and labels on proxies and delegates.
const (
	// AnnotationElect marks a pod for election (any value).
	AnnotationElect = "flotilla.dev/elect"
	// AnnotationAdmiraltyElect is Admiralty's election annotation, honoured with --accept-admiralty-annotation.
	AnnotationAdmiraltyElect = "multicluster.admiralty.io/elect"
	// AgentSecretName is the Secret in a pulled secondary's flotilla-system that gives its agent the
	// tunnel endpoint's CA (ca.crt) and its credential in the primary (token). join writes it; the
	// manager replaces the token before it expires.
	AgentSecretName = "flotilla-agent"
	// AnnotationClusters restricts election to a comma-separated list of cluster names.
	AnnotationClusters = "flotilla.dev/clusters"
	// AnnotationNoClusterFits is set by the webhook on a proxy no cluster takes at admission: why
	// none fits, per cluster. The proxy waits Pending for the primary's scheduler to bind it once a
	// virtual node has room, and Flotilla repeats the message as a NoClusterFits Event.
	AnnotationNoClusterFits = "flotilla.dev/no-cluster-fits"
	// AnnotationClusterWeights splits a controller's pods over clusters by weight, e.g.
	// "east=70,west=30"; clusters it does not name take none.
	AnnotationClusterWeights = "flotilla.dev/cluster-weights"
	// AnnotationClusterSelector restricts election to clusters whose virtual node labels (flotilla.dev/*) match.
	AnnotationClusterSelector = "flotilla.dev/cluster-selector"
	// AnnotationDelegateConstraints holds, as JSON, the scheduling constraints the delegate gets in its secondary.
	AnnotationDelegateConstraints = "flotilla.dev/delegate-constraints"
	// AnnotationFailoverSeconds is how long a proxy tolerates its secondary being unreachable before it is evicted.
	AnnotationFailoverSeconds = "flotilla.dev/failover-seconds"
	// SchedulingGatePlacement holds an elected pod that no cluster can take as things are (no node
	// matches its selectors or tolerates it): the proxy reconciler removes it, and gives the proxy
	// the clusters that fit, once one does.
	SchedulingGatePlacement = "flotilla.dev/placement"
	// AnnotationGang names the gang an elected pod belongs to, in its namespace: its members are
	// placed as one, all in one cluster that fits every one of them, and none is let go until the
	// whole gang is there and fits. AnnotationGangSize is the gang's size (its members' count).
	// Kueue's pod groups (LabelKueuePodGroup, AnnotationKueuePodGroupTotal) are gangs too.
	AnnotationGang     = "flotilla.dev/gang"
	AnnotationGangSize = "flotilla.dev/gang-size"
	// AnnotationPodGroup is the PodGroup (scheduling.k8s.io, Kubernetes 1.36+) an elected pod's
	// spec.schedulingGroup names: written by the webhook from the pod itself (a value the pod
	// brings is replaced, or removed when the pod names none), since the field is newer than the
	// API types Flotilla reads pods with. A PodGroup with a gang policy is a gang.
	AnnotationPodGroup = "flotilla.dev/pod-group"
	// AnnotationGangCluster is the cluster a gang's member was let go to, with the rest of its
	// gang (set by the proxy reconciler, under the seal; removed at admission).
	AnnotationGangCluster = "flotilla.dev/gang-cluster"
	// LabelKueuePodGroup and AnnotationKueuePodGroupTotal are Kueue's pod group: its name and
	// how many pods it has.
	LabelKueuePodGroup           = "kueue.x-k8s.io/pod-group-name"
	AnnotationKueuePodGroupTotal = "kueue.x-k8s.io/pod-group-total-count"
	// LabelKueueQueueName is the LocalQueue Kueue queues a pod or Job in: such a pod waits behind
	// Kueue's scheduling gate (or its Job suspended) until Kueue admits it.
	LabelKueueQueueName = "kueue.x-k8s.io/queue-name"
	// SchedulingGateQuota holds an elected pod of a namespace with a FleetQuota until the quota
	// has room for it: the webhook adds it, the quota controller removes it.
	SchedulingGateQuota = "flotilla.dev/quota"
	// AnnotationQuota is a proxy's standing with its namespace's FleetQuotas, set by the webhook
	// ("waiting") and by the quota controller ("admitted"), both under the seal: a proxy whose
	// gate was removed by anyone else is still waiting, and gets no delegate.
	AnnotationQuota = "flotilla.dev/quota"
	// QuotaWaiting is AnnotationQuota's value while the proxy waits for room.
	QuotaWaiting = "waiting"
	// QuotaAdmitted is AnnotationQuota's value once the quota controller let the proxy through.
	QuotaAdmitted = "admitted"
	// AnnotationQuotaExceeded says why a proxy waits for quota: the quota, the resource and the
	// numbers.
	AnnotationQuotaExceeded = "flotilla.dev/quota-exceeded"
	// AnnotationSeal is the webhook's keyed MAC over what it decided for a proxy (pkg/seal): the
	// proxy reconciler creates a delegate only for a proxy whose seal matches.
	AnnotationSeal = "flotilla.dev/seal"
	// AnnotationTraceparent is the W3C trace context of the elected pod's admission, set by the
	// webhook when tracing is on: every later span of that pod (its reconciles, the delegate's
	// creation, the status write, its release) joins the same trace.
	AnnotationTraceparent = "flotilla.dev/traceparent"
	// AnnotationDelegateIP is the delegate's pod IP, on the proxy.
	AnnotationDelegateIP = "flotilla.dev/delegate-ip"
	// AnnotationProxyUID is the proxy's UID, on the delegate.
	AnnotationProxyUID = "flotilla.dev/proxy-uid"
	// AnnotationAdmittedBy names, on a proxy, the manager replica whose webhook admitted it: a
	// replica matches only its own recent admissions against the proxies its cache shows.
	AnnotationAdmittedBy = "flotilla.dev/admitted-by"
	// AnnotationAtMostOnce asks that the pod never run twice: its proxy stays Terminating until its
	// delegate is proven gone or its secondary is fenced (StatefulSet pods get this by default).
	AnnotationAtMostOnce = "flotilla.dev/at-most-once"
	// LabelProxy marks proxy pods in the primary.
	LabelProxy = "flotilla.dev/proxy"
	// FinalizerDelegate keeps a proxy until its delegate is gone.
	FinalizerDelegate = "flotilla.dev/delegate"
	// LabelAllowExistingServiceAccounts, set to "true" on a secondary's namespace by an admin of
	// that cluster, lets delegates run as ServiceAccounts there that Flotilla did not create.
	LabelAllowExistingServiceAccounts = "flotilla.dev/allow-existing-serviceaccounts"
	// LabelEnabled opts a namespace in to election.
	LabelEnabled = "flotilla.dev/enabled"
	// TaintUnreachable is put on the virtual node of a secondary that failed its probes for a while.
	TaintUnreachable = "flotilla.dev/unreachable"
	// DefaultFailoverSeconds is the default of AnnotationFailoverSeconds, as Kubernetes' own eviction.
	DefaultFailoverSeconds = 300
)

// Volumes that follow elected pods.
const (
	// StorageClassRemote is the primary's StorageClass whose claims follow elected pods: each is
	// made again (the real claim) in the secondary where its pod runs.
	StorageClassRemote = "flotilla"
	// ProvisionerRemote is StorageClassRemote's provisioner: Flotilla itself.
	ProvisionerRemote = "flotilla.dev/remote"
	// FinalizerVolume keeps a primary claim of class flotilla until its real claim is gone.
	FinalizerVolume = "flotilla.dev/volume"
	// AnnotationVolumeCluster names, on a primary claim and on the volume that stands for its real
	// one, the cluster that holds the data.
	AnnotationVolumeCluster = "flotilla.dev/volume-cluster"
	// AnnotationRealVolume names, on the primary's volume, the real volume in its cluster.
	AnnotationRealVolume = "flotilla.dev/real-volume"
	// AnnotationClaimUID is the primary claim's UID, on its real claim.
	AnnotationClaimUID = "flotilla.dev/claim-uid"
	// AnnotationBackSince is set on a virtual node when its failover taint is lifted (the time,
	// RFC 3339), removed when it is tainted again or once --rebalance-on-return has moved its pods
	// back: when the secondary came back, whichever manager replica leads, restarts included.
	AnnotationBackSince = "flotilla.dev/back-since"
	// AnnotationDraining is set on a virtual node by `flotillactl cluster drain` (the time it
	// began) and removed by `flotillactl cluster uncordon`: a pod that chose
	// flotilla.dev/on-volume-cluster-loss: recreate leaves its data in that cluster for fresh claims
	// elsewhere, as it would once the cluster is lost.
	AnnotationDraining = "flotilla.dev/draining"
	// AnnotationVolumeRetainedIn lists, on a primary claim, the clusters (comma-separated) that
	// keep an earlier real claim of it: its pod started afresh elsewhere while they were
	// unreachable. Each is deleted with the primary claim, never before.
	AnnotationVolumeRetainedIn = "flotilla.dev/volume-retained-in"
	// AnnotationOnVolumeClusterLoss, on an elected pod, says what it does while the cluster that
	// holds its claims' data is away: wait there (the default) or, with OnVolumeClusterLossRecreate,
	// run elsewhere on fresh, empty claims once the failover bound has passed.
	AnnotationOnVolumeClusterLoss = "flotilla.dev/on-volume-cluster-loss"
	// OnVolumeClusterLossRecreate is AnnotationOnVolumeClusterLoss's opt-in to fresh claims elsewhere.
	OnVolumeClusterLossRecreate = "recreate"
	// OnVolumeClusterLossWait is AnnotationOnVolumeClusterLoss's default: the pod waits for its data.
	OnVolumeClusterLossWait = "wait"
)

// The replacement of a secondary by another (`flotillactl cluster replace`).
const (
	// AnnotationReplacement, on the ClusterDetector of the secondary being replaced, records the
	// replacement in progress (JSON: ReplacementState), so that an interrupted one resumes where
	// it was; the manager shows it as the condition Replacement.
	AnnotationReplacement = "flotilla.dev/replacement"
)

// ReplacementState is AnnotationReplacement's value.
type ReplacementState struct {
	// With is the secondary that takes over.
	With string `json:"with"`
	// Step is the step under way: Checking, Replicating, Draining, Detaching or Removing.
	Step string `json:"step"`
	// Since is when that step began (RFC 3339).
	Since string `json:"since,omitempty"`
}

// The namespace opt-in of Replicators.
const (
	// LabelReplicationAllowed, set to "true" on an existing namespace by whoever may label it,
	// lets a Replicator write into it although the Replicator did not create it: without it, a
	// Replicator's author could write into any namespace that happens to exist (argocd, a
	// tenant's), in the primary and in every secondary.
	LabelReplicationAllowed = "flotilla.dev/replication-allowed"
)

// ReplicatorLabelValue is the value of LabelReplicator for a Replicator: its name, fitted into a
// label value (63 characters) readable and unique (a longer name is cut to 52 and suffixed with
// "-" and 10 hex digits of its hash).
func ReplicatorLabelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:52], "-.") + "-" + hex.EncodeToString(sum[:])[:10]
}
