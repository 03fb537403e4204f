package translate

import (
	corev1 "k8s.io/api/core/v1"
)

// EventOrigin is the related object of an Event Flotilla shows in the primary for an Event of a
// secondary (a delegate's, a real claim's): that Event itself. An events.k8s.io recorder merges
// the Events of one object, reason and action into one series and keeps the first one's note,
// so a secondary's "Failed: Error: ErrImagePull" would hide the "Failed to pull image ..." after
// it; naming its origin keeps each Event of the secondary its own, and a repeat of one (its
// count grown) counted in its series.
func EventOrigin(e *corev1.Event) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Event", Namespace: e.Namespace, Name: e.Name, UID: e.UID}
}

// InCluster is a message of a secondary's, as the primary shows it: after the cluster's name.
func InCluster(cluster, message string) string { return "In cluster " + cluster + ": " + message }
