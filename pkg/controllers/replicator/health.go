package replicator

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Reasons of an ObjectHealth.
const (
	HealthAvailable                = "Available"
	HealthMissing                  = "Missing"
	HealthProgressing              = "Progressing"
	HealthImagePullFailed          = "ImagePullFailed"
	HealthContainersFailing        = "ContainersFailing"
	HealthProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	HealthNoEndpoints              = "NoEndpoints"
	HealthAdmitted                 = "Admitted"
	HealthNotAdmitted              = "NotAdmitted"
	HealthNoIngressController      = "NoIngressController"
	HealthValid                    = "Valid"
	HealthInvalid                  = "Invalid"
	HealthExpired                  = "Expired"
	HealthNotYetValid              = "NotYetValid"
	// HealthCurrent, HealthStalled and HealthTerminating judge a kind by its status (StatusHealth).
	HealthCurrent     = "Current"
	HealthStalled     = "Stalled"
	HealthTerminating = "Terminating"
)

// pullFailures and containerFailures are the waiting reasons of a kubelet that say a container
// will not start by waiting: the spec (an image, a command, a reference) must change.
var (
	pullFailures      = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
	containerFailures = []string{"CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)

// replicaCounts are what a workload's controller reports of its replicas.
type replicaCounts struct {
	generation, observed               int64
	desired, updated, available, total int32
}

// workloadHealth judges a workload from its counts: healthy when its controller has seen its
// latest generation and every desired replica is updated and available, with no old one left.
// Not yet, it is Progressing, or Failing when one of its pods waits on an image that cannot be
// pulled or on containers that cannot run.
func workloadHealth(kind, name string, c replicaCounts, pods []corev1.Pod) flotillav1.ObjectHealth {
	h := flotillav1.ObjectHealth{Kind: kind, Name: name}
	if c.observed < c.generation {
		h.Reason, h.Message = HealthProgressing, fmt.Sprintf("generation %d not yet observed by its controller", c.generation)
		return h
	}
	if c.updated >= c.desired && c.available >= c.desired && c.total <= c.updated {
		h.Healthy, h.Reason = true, HealthAvailable
		h.Message = fmt.Sprintf("%d of %d replicas available", c.available, c.desired)
		return h
	}
	h.Reason = HealthProgressing
	h.Message = fmt.Sprintf("%d of %d replicas available, %d updated", c.available, c.desired, c.updated)
	if reason, msg := podFailure(pods); reason != "" {
		h.Reason, h.Failing, h.Message = reason, true, h.Message+"; "+msg
	}
	return h
}

// DeploymentHealth judges a Deployment (workloadHealth; desired replicas default to 1), Failing
// also once it is past its progress deadline. pods are the Deployment's (its selector's) in its
// namespace.
func DeploymentHealth(name string, d *appsv1.Deployment, pods []corev1.Pod) flotillav1.ObjectHealth {
	if d == nil {
		return flotillav1.ObjectHealth{Kind: "Deployment", Name: name, Reason: HealthMissing, Message: "not found"}
	}
	st := d.Status
	h := workloadHealth("Deployment", name, replicaCounts{generation: d.Generation, observed: st.ObservedGeneration,
		desired: ptr.Deref(d.Spec.Replicas, 1), updated: st.UpdatedReplicas, available: st.AvailableReplicas, total: st.Replicas}, pods)
	if h.Healthy || h.Failing || st.ObservedGeneration < d.Generation {
		return h
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			h.Reason, h.Failing, h.Message = HealthProgressDeadlineExceeded, true, h.Message+"; "+c.Message
		}
	}
	return h
}

// StatefulSetHealth judges a StatefulSet (workloadHealth; desired replicas default to 1): with a
// rolling update, the replicas at or above its partition must be updated; with OnDelete, whatever
// revision they run.
func StatefulSetHealth(name string, s *appsv1.StatefulSet, pods []corev1.Pod) flotillav1.ObjectHealth {
	if s == nil {
		return flotillav1.ObjectHealth{Kind: "StatefulSet", Name: name, Reason: HealthMissing, Message: "not found"}
	}
	st := s.Status
	desired := ptr.Deref(s.Spec.Replicas, 1)
	c := replicaCounts{generation: s.Generation, observed: st.ObservedGeneration, desired: desired,
		updated: st.UpdatedReplicas, available: st.AvailableReplicas, total: st.Replicas}
	switch u := s.Spec.UpdateStrategy; {
	case u.Type == appsv1.OnDeleteStatefulSetStrategyType:
		c.updated = c.total
	case u.RollingUpdate != nil && u.RollingUpdate.Partition != nil:
		// Replicas below the partition keep their revision: they count as updated.
		c.updated += min(max(*u.RollingUpdate.Partition, 0), desired)
		c.total = min(c.total, c.updated)
	}
	return workloadHealth("StatefulSet", name, c, pods)
}

// DaemonSetHealth judges a DaemonSet (workloadHealth): every node it should run on has an
// updated, available pod.
func DaemonSetHealth(name string, d *appsv1.DaemonSet, pods []corev1.Pod) flotillav1.ObjectHealth {
	if d == nil {
		return flotillav1.ObjectHealth{Kind: "DaemonSet", Name: name, Reason: HealthMissing, Message: "not found"}
	}
	st := d.Status
	return workloadHealth("DaemonSet", name, replicaCounts{generation: d.Generation, observed: st.ObservedGeneration,
		desired: st.DesiredNumberScheduled, updated: st.UpdatedNumberScheduled, available: st.NumberAvailable,
		total: st.CurrentNumberScheduled}, pods)
}

// podFailure is the first container of the pods that waits with a failure reason, and what it says.
func podFailure(pods []corev1.Pod) (reason, msg string) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			w := cs.State.Waiting
			if w == nil {
				continue
			}
			what := fmt.Sprintf("pod %s container %s: %s", p.Name, cs.Name, w.Reason)
			if w.Message != "" {
				what += ": " + w.Message
			}
			switch {
			case slices.Contains(pullFailures, w.Reason):
				return HealthImagePullFailed, what
			case slices.Contains(containerFailures, w.Reason):
				return HealthContainersFailing, what
			}
		}
	}
	return "", ""
}

// ServiceHealth judges a Service that selects pods: healthy when one of its EndpointSlices holds
// a ready endpoint. judged is false for a Service without a selector (its endpoints are someone
// else's) and an ExternalName one.
func ServiceHealth(svc *corev1.Service, endpointSlices []discoveryv1.EndpointSlice) (h flotillav1.ObjectHealth, judged bool) {
	h = flotillav1.ObjectHealth{Kind: "Service", Name: svc.Name}
	if len(svc.Spec.Selector) == 0 || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return h, false
	}
	ready := 0
	for _, s := range endpointSlices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready++
			}
		}
	}
	if ready == 0 {
		h.Reason, h.Message = HealthNoEndpoints, "no ready endpoint: no ready pod matches its selector"
		return h, true
	}
	h.Healthy, h.Reason, h.Message = true, HealthAvailable, fmt.Sprintf("%d ready endpoint(s)", ready)
	return h, true
}

// IngressClassOf is the class an Ingress names (spec, or the older annotation), "" when none.
func IngressClassOf(ing *networkingv1.Ingress) string {
	if ing.Spec.IngressClassName != nil {
		return *ing.Spec.IngressClassName
	}
	return ing.Annotations["kubernetes.io/ingress.class"]
}

// IngressHealth judges an Ingress: where the cluster has its IngressClass (an ingress controller
// installed there), healthy once admitted, that is once the controller wrote a load-balancer
// address in its status. Where the cluster has no such class nothing would ever admit it: it is
// reported (NoIngressController) and counted healthy, so a cluster without an ingress controller
// does not hold a rollout forever.
func IngressHealth(ing *networkingv1.Ingress, classExists bool) flotillav1.ObjectHealth {
	h := flotillav1.ObjectHealth{Kind: "Ingress", Name: ing.Name}
	class := IngressClassOf(ing)
	switch {
	case class == "":
		h.Healthy, h.Reason, h.Message = true, HealthNoIngressController, "names no IngressClass: not judged"
	case !classExists:
		h.Healthy, h.Reason = true, HealthNoIngressController
		h.Message = fmt.Sprintf("no IngressClass %q in this cluster: nothing admits it, not judged", class)
	case len(ing.Status.LoadBalancer.Ingress) == 0:
		h.Reason, h.Message = HealthNotAdmitted, fmt.Sprintf("no load-balancer address yet from the controller of class %q", class)
	default:
		var addrs []string
		for _, a := range ing.Status.LoadBalancer.Ingress {
			addrs = append(addrs, a.IP+a.Hostname)
		}
		h.Healthy, h.Reason, h.Message = true, HealthAdmitted, "at "+strings.Join(addrs, ", ")
	}
	return h
}

// CertificateHealth judges a TLS Secret by the certificate it holds (PEM, the first block):
// healthy when it parses and now is within its validity. Flotilla never reads a Secret in a
// secondary: the certificate judged is the one it applied there.
func CertificateHealth(secret string, certPEM []byte, now time.Time) flotillav1.ObjectHealth {
	h := flotillav1.ObjectHealth{Kind: "Secret", Name: secret}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		h.Reason, h.Failing, h.Message = HealthInvalid, true, "no PEM certificate"
		return h
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	switch {
	case err != nil:
		h.Reason, h.Failing, h.Message = HealthInvalid, true, "the certificate does not parse: "+err.Error()
	case now.After(cert.NotAfter):
		h.Reason, h.Failing, h.Message = HealthExpired, true, "expired at "+cert.NotAfter.UTC().Format(time.RFC3339)
	case now.Before(cert.NotBefore):
		h.Reason, h.Failing, h.Message = HealthNotYetValid, true, "valid from "+cert.NotBefore.UTC().Format(time.RFC3339)
	default:
		h.Healthy, h.Reason, h.Message = true, HealthValid, "valid until "+cert.NotAfter.UTC().Format(time.RFC3339)
	}
	return h
}

// StatusHealth judges an object of a kind Flotilla has no special rule for by its status, as
// Flux and Argo CD do (kstatus): healthy once Current (its controller observed its generation, and
// it says Ready, or says nothing against it); Failing when Stalled; not yet while Reconciling, while
// Ready is not True, or while its generation is not yet observed.
func StatusHealth(u *unstructured.Unstructured) flotillav1.ObjectHealth {
	h := flotillav1.ObjectHealth{Kind: u.GetKind(), Name: u.GetName()}
	res, err := kstatus.Compute(u)
	if err != nil {
		h.Reason, h.Message = HealthUnknown, "its status cannot be read: "+err.Error()
		return h
	}
	h.Message = res.Message
	switch res.Status {
	case kstatus.CurrentStatus:
		h.Healthy, h.Reason = true, HealthCurrent
	case kstatus.FailedStatus:
		h.Reason, h.Failing = HealthStalled, true
	case kstatus.TerminatingStatus:
		h.Reason = HealthTerminating
	case kstatus.InProgressStatus:
		h.Reason = HealthProgressing
	default:
		h.Reason = HealthUnknown
	}
	if h.Message == "" {
		h.Message = string(res.Status)
	}
	return h
}

// allHealthy says whether every judged object is healthy.
func allHealthy(hs []flotillav1.ObjectHealth) bool {
	for _, h := range hs {
		if !h.Healthy {
			return false
		}
	}
	return true
}

// firstUnhealthy describes the first unhealthy object, "" when none.
func firstUnhealthy(hs []flotillav1.ObjectHealth) (string, bool) {
	for _, h := range hs {
		if !h.Healthy {
			return fmt.Sprintf("%s %s: %s: %s", h.Kind, h.Name, h.Reason, h.Message), h.Failing
		}
	}
	return "", false
}
