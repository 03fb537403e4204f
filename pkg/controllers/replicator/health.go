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
)

// pullFailures and containerFailures are the waiting reasons of a kubelet that say a container
// will not start by waiting: the spec (an image, a command, a reference) must change.
var (
	pullFailures      = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
	containerFailures = []string{"CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)

// DeploymentHealth judges a Deployment: healthy when its controller has seen its latest
// generation and every desired replica is updated and available, with no old one left. Not yet,
// it is Progressing, or Failing when a pod of it waits on an image that cannot be pulled or on
// containers that cannot run, or the Deployment is past its progress deadline. pods are the
// Deployment's (its selector's) in its namespace.
func DeploymentHealth(name string, d *appsv1.Deployment, pods []corev1.Pod) flotillav1.ObjectHealth {
	h := flotillav1.ObjectHealth{Kind: "Deployment", Name: name}
	if d == nil {
		h.Reason, h.Message = HealthMissing, "not found"
		return h
	}
	if d.Status.ObservedGeneration < d.Generation {
		h.Reason, h.Message = HealthProgressing, fmt.Sprintf("generation %d not yet observed by the Deployment controller", d.Generation)
		return h
	}
	desired := int32(1)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	st := d.Status
	if st.UpdatedReplicas >= desired && st.AvailableReplicas >= desired && st.Replicas <= st.UpdatedReplicas {
		h.Healthy, h.Reason = true, HealthAvailable
		h.Message = fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, desired)
		return h
	}
	h.Reason = HealthProgressing
	h.Message = fmt.Sprintf("%d of %d replicas available, %d updated", st.AvailableReplicas, desired, st.UpdatedReplicas)
	if reason, msg := podFailure(pods); reason != "" {
		h.Reason, h.Failing, h.Message = reason, true, h.Message+"; "+msg
		return h
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			h.Reason, h.Failing, h.Message = HealthProgressDeadlineExceeded, true, h.Message+"; "+c.Message
		}
	}
	return h
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
