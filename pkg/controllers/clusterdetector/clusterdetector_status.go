package clusterdetector

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// StatusInput is everything the status of one ClusterDetector is computed from.
type StatusInput struct {
	Snapshot clusters.Snapshot
	// Primary is true for the primary's ClusterDetector; ConfigError is then the registration
	// Secret's error, if any.
	Primary     bool
	ConfigError error
	// PrimaryVersion is the primary's API server version, shown when its context is not
	// registered (the manager reaches it in cluster, and probes only what is registered).
	PrimaryVersion string
}

// setSpec sets the spec and labels a ClusterDetector must have.
func setSpec(cd *flotillav1.ClusterDetector, in StatusInput) {
	role := flotillav1.RoleSecondary
	if in.Primary {
		role = flotillav1.RolePrimary
	}
	if cd.Labels == nil {
		cd.Labels = map[string]string{}
	}
	cd.Labels[flotillav1.LabelRole] = role
	cd.Labels[flotillav1.LabelCluster] = cd.Name
	cd.Spec = flotillav1.ClusterDetectorSpec{
		Context: in.Snapshot.Entry.Context, Cluster: in.Snapshot.Entry.Cluster, User: in.Snapshot.Entry.User,
	}
}

// setStatus computes a ClusterDetector's status from a snapshot; it never does I/O.
func setStatus(cd *flotillav1.ClusterDetector, in StatusInput) {
	s := in.Snapshot
	st := &cd.Status
	st.ClusterStatus, st.Reason, st.Message = s.Status, s.Reason, s.Message
	st.ClusterID, st.KubernetesVersion = s.ID, s.Version
	if in.Primary && s.Entry.Context == "" {
		// No context of the registration reaches the primary: its context and cluster columns stay
		// empty, and the reason says why (the manager runs there; no context is needed).
		st.KubernetesVersion = in.PrimaryVersion
		st.Reason = flotillav1.ReasonPrimary
		st.Message = "The primary cluster, where Flotilla runs: the manager reaches it in cluster, so no context of the registration Secret names it"
	}
	st.Mode, st.Tunnel = modeStatus(s)
	st.VirtualNode, st.StorageClass = "", ""
	if s.UsableSecondary() {
		st.VirtualNode = flotillav1.VirtualNodeName(cd.Name)
		st.StorageClass = s.StorageClass
	}
	if s.CapacitySynced {
		st.NodeCount = int32(s.Capacity.NodeCount)
		st.Capacity, st.Allocatable = s.Capacity.Capacity, s.Capacity.Allocatable
		st.LargestFree = s.Capacity.LargestFree()
	}
	st.MissingFeatures = s.MissingFeatures
	st.Devices, st.DevicesUnknown = nil, ""
	if dv := s.Capacity.Devices; s.CapacitySynced && dv != nil {
		st.DevicesUnknown = dv.Unknown
		for _, c := range s.Capacity.DeviceCounts {
			st.Devices = append(st.Devices, flotillav1.DeviceClassStatus{Class: c.Class, Total: int32(c.Total), Free: int32(c.Free)})
		}
	}
	st.TokenExpirationTime = nil
	if s.TokenExpiry != nil {
		t := metav1.NewTime(*s.TokenExpiry)
		st.TokenExpirationTime = &t
	}
	st.LastProbeTime = nil
	if !s.LastProbe.IsZero() {
		t := metav1.NewTime(s.LastProbe.Truncate(time.Second))
		st.LastProbeTime = &t
	}
	st.ObservedGeneration = cd.Generation

	ready := metav1.Condition{Type: flotillav1.ConditionReady, ObservedGeneration: cd.Generation}
	if s.Status == flotillav1.ClusterRunning {
		ready.Status, ready.Reason = metav1.ConditionTrue, flotillav1.ReasonProbeSucceeded
		ready.Message = fmt.Sprintf("Cluster %s answers its health probes", cd.Name)
	} else {
		ready.Status, ready.Reason = metav1.ConditionFalse, s.Reason
		ready.Message = fmt.Sprintf("Cluster %s is not usable: %s", cd.Name, s.Message)
	}
	meta.SetStatusCondition(&st.Conditions, ready)

	registered := metav1.Condition{Type: flotillav1.ConditionRegistered, ObservedGeneration: cd.Generation,
		Status: metav1.ConditionTrue, Reason: flotillav1.ReasonRegistered}
	switch {
	case in.Primary && s.Entry.Context == "":
		registered.Reason, registered.Message = flotillav1.ReasonPrimary, "The primary cluster, where Flotilla runs (reached in cluster, not through a registered context)"
	case in.Primary:
		registered.Reason, registered.Message = flotillav1.ReasonPrimary, fmt.Sprintf("The primary cluster, where Flotilla runs; registered by context %s", s.Entry.Context)
	case s.Reason == flotillav1.ReasonInvalidContext || s.Reason == flotillav1.ReasonDuplicateCluster ||
		s.Reason == flotillav1.ReasonIdentityChanged:
		registered.Status, registered.Reason, registered.Message = metav1.ConditionFalse, s.Reason, s.Message
	case s.OwnerMessage != "":
		registered.Status, registered.Reason, registered.Message = metav1.ConditionFalse, flotillav1.ReasonOwnerMissing, s.OwnerMessage
	default:
		registered.Message = fmt.Sprintf("Registered by context %s", s.Entry.Context)
	}
	meta.SetStatusCondition(&st.Conditions, registered)

	setReplacement(cd)

	if in.Primary {
		valid := metav1.Condition{Type: flotillav1.ConditionKubeconfigValid, ObservedGeneration: cd.Generation,
			Status: metav1.ConditionTrue, Reason: flotillav1.ReasonKubeconfigParsed,
			Message: "The registration Secret " + flotillav1.SystemNamespace + "/" + flotillav1.KubeconfigSecretName + " is in force"}
		if in.ConfigError != nil {
			valid.Status, valid.Reason = metav1.ConditionFalse, flotillav1.ReasonKubeconfigUnparsable
			valid.Message = "The last good registration stays in force: " + in.ConfigError.Error()
		}
		meta.SetStatusCondition(&st.Conditions, valid)
	}
}

// setReplacement shows the replacement `flotillactl cluster replace` records on the detector
// (AnnotationReplacement) as the condition Replacement, and removes the condition once the
// annotation is gone. An annotation that does not parse is said so, not hidden.
func setReplacement(cd *flotillav1.ClusterDetector) {
	raw, ok := cd.Annotations[flotillav1.AnnotationReplacement]
	if !ok {
		meta.RemoveStatusCondition(&cd.Status.Conditions, flotillav1.ConditionReplacement)
		return
	}
	cond := metav1.Condition{Type: flotillav1.ConditionReplacement, ObservedGeneration: cd.Generation, Status: metav1.ConditionTrue}
	var st flotillav1.ReplacementState
	if err := json.Unmarshal([]byte(raw), &st); err != nil || st.With == "" || st.Step == "" {
		cond.Status, cond.Reason = metav1.ConditionUnknown, "Unreadable"
		cond.Message = fmt.Sprintf("Annotation %s does not say which cluster replaces %s and at which step: %q", flotillav1.AnnotationReplacement, cd.Name, raw)
	} else {
		cond.Reason = st.Step
		cond.Message = fmt.Sprintf("Being replaced by %s: step %s", st.With, st.Step)
		if st.Since != "" {
			cond.Message += " since " + st.Since
		}
		cond.Message += " (flotillactl cluster replace " + cd.Name + " --with " + st.With + " resumes it)"
	}
	meta.SetStatusCondition(&cd.Status.Conditions, cond)
}

// modeStatus is how the manager reaches the cluster and, for a pulled one, its tunnel.
func modeStatus(s clusters.Snapshot) (string, *flotillav1.TunnelStatus) {
	if s.Mode != clusters.ModePull {
		return "", nil
	}
	t := s.Tunnel
	if t == nil {
		return flotillav1.ModePull, nil
	}
	out := &flotillav1.TunnelStatus{Connected: t.Connected, Connects: int32(min(t.Connects, math.MaxInt32)), LastError: t.LastError} //nolint:gosec // bounded above
	if !t.Since.IsZero() {
		since := metav1.NewTime(t.Since.Truncate(time.Second))
		out.Since = &since
	}
	if t.RTT > 0 {
		out.RoundTrip = &metav1.Duration{Duration: t.RTT.Round(100 * time.Microsecond)}
	}
	if t.Connected && !t.Credential.Expires.IsZero() {
		expires := metav1.NewTime(t.Credential.Expires)
		out.CredentialExpires = &expires
	}
	return flotillav1.ModePull, out
}
