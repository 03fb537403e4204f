package clusters

import (
	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// VirtualNodeLabels are the labels the cluster's virtual node carries. The virtual node manager
// writes them and the webhook matches cluster selectors against them, so both read this one
// function. No kubernetes.io/os|arch or standard topology keys: system DaemonSets select on those.
func (s Snapshot) VirtualNodeLabels() map[string]string {
	name := flotillav1.VirtualNodeName(s.Name)
	l := map[string]string{
		flotillav1.LabelNodeType:           flotillav1.NodeTypeVirtualKubelet,
		corev1.LabelHostname:               name,
		flotillav1.LabelCluster:            s.Name,
		"node-role.kubernetes.io/cluster":  "",
		corev1.LabelNodeExcludeBalancers:   "true",
		"node.kubernetes.io/instance-type": "flotilla-cluster",
	}
	for key, v := range map[string]string{flotillav1.LabelOS: s.Capacity.OS, flotillav1.LabelArch: s.Capacity.Arch,
		flotillav1.LabelRegion: s.Capacity.Region, flotillav1.LabelZone: s.Capacity.Zone} {
		if v != "" {
			l[key] = v
		}
	}
	return l
}
