package inventory

import (
	"encoding/base64"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// The well-known ClusterProperty names of KEP-2149.
const (
	PropertyClusterID  = "cluster.clusterset.k8s.io"
	PropertyClusterSet = "clusterset.k8s.io"
)

// ClusterManager is the name Flotilla gives itself as a ClusterProfile's manager
// (spec.clusterManager.name and the label x-k8s.io/cluster-manager).
const ClusterManager = "flotilla"

// LabelClusterManager is KEP-4322's label of a ClusterProfile's manager.
const LabelClusterManager = "x-k8s.io/cluster-manager"

// Properties are the ClusterProperties a cluster of the set gets: its name and the set's ID.
func Properties(cluster, clusterSet string) map[string]string {
	return map[string]string{PropertyClusterID: cluster, PropertyClusterSet: clusterSet}
}

// ProfileName is the ClusterProfile of a secondary: prefixed with the manager's name, as the KEP
// recommends, so two managers' profiles of one cluster never collide.
func ProfileName(cluster string) string { return ClusterManager + "-" + cluster }

// ProfileStatus is a secondary's ClusterProfile status: ControlPlaneHealthy from its probes,
// Joined while it is registered and usable, its Kubernetes version, and its properties.
type ProfileStatus struct {
	Conditions []metav1.Condition
	Version    string
	Properties map[string]string
}

// AccessProvider is the name of the access provider Flotilla's ClusterProfiles carry: the
// cluster inventory API's secretreader plugin, which reads the token of Secret <its namespace>/
// <clusterName> (key token), clusterName given by the provider's exec extension.
const AccessProvider = "secretreader"

// ExecExtension is the cluster extension whose content client-go gives an exec credential plugin
// (provideClusterInfo), KEP-5339's way to tell the plugin which cluster it serves.
const ExecExtension = "client.authentication.k8s.io/exec"

// SecretTokenKey is the key of the token in a credential Secret the secretreader plugin reads.
const SecretTokenKey = "token"

// AccessProviders are a secondary's status.accessProviders (KEP-5339): its API server and CA,
// and the secretreader provider, told to read the Secret named as the profile (which Flotilla
// keeps in each consumer namespace). nil for a cluster nothing outside Flotilla can dial.
func AccessProviders(profile, server string, caData []byte) []any {
	if server == "" {
		return nil
	}
	cluster := map[string]any{"server": server,
		"extensions": []any{map[string]any{"name": ExecExtension, "extension": map[string]any{"clusterName": profile}}}}
	if len(caData) > 0 {
		cluster["certificate-authority-data"] = base64.StdEncoding.EncodeToString(caData)
	}
	return []any{map[string]any{"name": AccessProvider, "cluster": cluster}}
}

// StatusOf is the ClusterProfile status of a secondary's snapshot.
func StatusOf(s clusters.Snapshot, clusterSet string, now time.Time) ProfileStatus {
	healthy := metav1.Condition{Type: "ControlPlaneHealthy", Status: metav1.ConditionTrue, Reason: "Healthy",
		Message: "its API server answers Flotilla's probes", LastTransitionTime: metav1.NewTime(s.LastTransition)}
	if s.Status != flotillav1.ClusterRunning {
		healthy.Status, healthy.Reason, healthy.Message = metav1.ConditionFalse, orDefault(s.Reason, "Unknown"), orDefault(s.Message, "it does not answer Flotilla's probes")
	}
	joined := metav1.Condition{Type: "Joined", Status: metav1.ConditionTrue, Reason: "Registered",
		Message: "registered with this Flotilla primary", LastTransitionTime: metav1.NewTime(now)}
	if !s.UsableSecondary() {
		joined.Status, joined.Reason, joined.Message = metav1.ConditionFalse, "NotUsable", "registered, but not usable as a secondary: "+orDefault(s.Message, s.Reason)
	}
	return ProfileStatus{Conditions: []metav1.Condition{healthy, joined}, Version: s.Version, Properties: Properties(s.Name, clusterSet)}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Stale are the profiles (by name) this primary wrote for clusters no longer registered.
func Stale(written []string, registered []string) []string {
	var out []string
	for _, name := range written {
		if !slices.ContainsFunc(registered, func(c string) bool { return ProfileName(c) == name }) {
			out = append(out, name)
		}
	}
	return out
}
