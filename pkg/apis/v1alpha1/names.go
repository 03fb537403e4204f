package v1alpha1

// Labels, annotations and names Flotilla sets and reads.
const (
	// SystemNamespace is where the manager, its Secret and the ClusterDetectors live.
	SystemNamespace = "flotilla-system"
	// KubeconfigSecretName is the Secret (in SystemNamespace) whose key KubeconfigSecretKey holds a
	// kubeconfig with one context per registered cluster.
	KubeconfigSecretName = "kubeconfig"
	// KubeconfigSecretKey is the key of the kubeconfig in that Secret.
	KubeconfigSecretKey = "config"

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
	// LabelOS, LabelArch, LabelRegion and LabelZone describe a secondary on its virtual node
	// (the standard kubernetes.io/os|arch and topology keys are deliberately not used).
	LabelOS     = "flotilla.dev/os"
	LabelArch   = "flotilla.dev/arch"
	LabelRegion = "flotilla.dev/region"
	LabelZone   = "flotilla.dev/zone"

	// VirtualNodePrefix starts every virtual node's name: flotilla-<cluster name>.
	VirtualNodePrefix = "flotilla-"
	// TaintVirtualNode keeps pods that do not tolerate it off virtual nodes.
	TaintVirtualNode = "virtual-kubelet.io/provider"
	// TaintVirtualNodeValue is that taint's value.
	TaintVirtualNodeValue = "flotilla"
)

// VirtualNodeName is the name of the virtual node of a cluster.
func VirtualNodeName(cluster string) string { return VirtualNodePrefix + cluster }
