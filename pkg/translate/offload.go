package translate

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// NotOffloadable lists why a pod spec cannot run as a delegate in another cluster, nil when it
// can: ephemeral volumes of other classes than flotilla stay in their cluster (a
// PersistentVolumeClaim follows the pod when its class is flotilla, which the webhook checks, as it
// reads the claim), another scheduler is not Flotilla's to stand in
// for, and a volume whose Secret reference Flotilla does not copy would resolve to the
// secondary's own Secret of that name. The webhook refuses such a pod at admission, and the proxy
// reconciler asks again before it creates a delegate, whoever made the proxy.
func NotOffloadable(spec *corev1.PodSpec) []string {
	var problems []string
	for _, v := range spec.Volumes {
		switch {
		case v.Ephemeral != nil && !RemoteEphemeral(v):
			problems = append(problems, fmt.Sprintf("volume %s is an ephemeral volume whose storage class is not %s (only that class follows an elected pod)", v.Name, flotillav1.StorageClassRemote))
		}
		if field := uncopiedSecretRef(v); field != "" {
			problems = append(problems, fmt.Sprintf("volume %s references a Secret in %s, which Flotilla does not copy (the secondary's own Secret of that name would be used)", v.Name, field))
		}
		if v.CSI != nil {
			for _, key := range slices.Sorted(maps.Keys(v.CSI.VolumeAttributes)) {
				if kind, ok := csiAttributesNamingObjects[key]; ok {
					problems = append(problems, fmt.Sprintf("volume %s names a %s in csi.volumeAttributes[%s], which Flotilla does not copy (the secondary's own %s of that name would be used)", v.Name, kind, key, kind))
				}
			}
		}
	}
	if s := spec.SchedulerName; s != "" && s != corev1.DefaultSchedulerName {
		problems = append(problems, fmt.Sprintf("it asks for scheduler %s", s))
	}
	return problems
}

// csiAttributesNamingObjects are the inline CSI volume attributes known to name an object of the
// pod's namespace, which its driver reads where the pod runs: the Secrets Store CSI driver's
// SecretProviderClass, cert-manager csi-driver's Issuer.
var csiAttributesNamingObjects = map[string]string{
	"secretProviderClass":             "SecretProviderClass",
	"csi.cert-manager.io/issuer-name": "cert-manager Issuer",
}

// uncopiedSecretRef names the field of a volume that references a Secret Flotilla does not copy
// ("" for none). Only secret and projected volumes, env and envFrom, and image pull Secrets are
// copied (Dependencies).
func uncopiedSecretRef(v corev1.Volume) string {
	switch {
	case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
		return "csi.nodePublishSecretRef"
	case v.CephFS != nil && v.CephFS.SecretRef != nil:
		return "cephfs.secretRef"
	case v.RBD != nil && v.RBD.SecretRef != nil:
		return "rbd.secretRef"
	case v.ISCSI != nil && v.ISCSI.SecretRef != nil:
		return "iscsi.secretRef"
	case v.AzureFile != nil && v.AzureFile.SecretName != "":
		return "azureFile.secretName"
	case v.FlexVolume != nil && v.FlexVolume.SecretRef != nil:
		return "flexVolume.secretRef"
	case v.ScaleIO != nil && v.ScaleIO.SecretRef != nil:
		return "scaleIO.secretRef"
	case v.StorageOS != nil && v.StorageOS.SecretRef != nil:
		return "storageos.secretRef"
	}
	return ""
}
