package clusters

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxClusterNameLength keeps flotilla-<name> (the virtual node) and derived label values within 63.
const MaxClusterNameLength = 54

// ClusterName derives a cluster's name from its context name: the context name itself when it is
// already a DNS-1123 label of at most MaxClusterNameLength characters, else a sanitised form
// (lower case, runs of other characters as one '-') followed by '-' and a short hash of the original,
// so distinct context names never collide (gke_p_z_n, EKS ARNs, kubeadm's defaults).
func ClusterName(context string) string {
	if ValidClusterName(context) {
		return context
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(context) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	sum := sha256.Sum256([]byte(context))
	suffix := hex.EncodeToString(sum[:])[:6]
	base := strings.Trim(b.String(), "-")
	if limit := MaxClusterNameLength - len(suffix) - 1; len(base) > limit {
		base = strings.TrimRight(base[:limit], "-")
	}
	if base == "" {
		return "cluster-" + suffix
	}
	return base + "-" + suffix
}

// ValidClusterName says whether name can be a cluster name as it is.
func ValidClusterName(name string) bool {
	return len(name) <= MaxClusterNameLength && len(validation.IsDNS1123Label(name)) == 0
}
