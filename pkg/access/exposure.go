package access

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Exposure is what a secondary's admin lets a primary expose there, given at `join`: the Ingress
// hosts (names, or *.domain for its subdomains) and the Service types beyond ClusterIP it may
// create. The primary's own admission rules (who may claim which host, who may open a
// LoadBalancer) do not run in a secondary, so without a list a tenant's Ingress copied there could
// take any host the secondary's ingress controller serves. Empty: any host, any type (the admin
// accepts that by not giving a list).
type Exposure struct {
	IngressHosts []string
	ServiceTypes []corev1.ServiceType
}

// Validate says what is wrong with the lists, before anything is applied.
func (e Exposure) Validate() error {
	for _, h := range e.IngressHosts {
		name := strings.TrimPrefix(h, "*.")
		if h == "*" || strings.Contains(name, "*") || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return fmt.Errorf("ingress host %q is neither a host name nor *.<domain>", h)
		}
	}
	for _, t := range e.ServiceTypes {
		if !slices.Contains([]corev1.ServiceType{corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName}, t) {
			return fmt.Errorf("service type %q: the types to allow beyond ClusterIP are NodePort, LoadBalancer and ExternalName", t)
		}
	}
	return nil
}

// snippetsExpression refuses, always, an Ingress that carries a snippet annotation (ingress-nginx's
// configuration-, server-, auth- and other -snippet keys): raw configuration an ingress controller
// runs as it is, which no secondary's admin reviewed. Flotilla drops them from every Ingress it
// writes (translate.DropSnippets); this holds whoever asks it to write one.
const snippetsExpression = `request.resource.resource != 'ingresses' || request.operation == 'DELETE' ||
!object.metadata.?annotations.orValue({}).exists(k, k.endsWith('-snippet') || k.endsWith('-snippets') || k.endsWith('/snippet'))`

// hostsExpression lets the identity create or update an Ingress only for listed hosts (rules and
// TLS); a rule without a host (any host) is refused too.
func hostsExpression(hosts []string) string {
	allowed := `[` + celStrings(hosts) + `].exists(p, p == h || (p.startsWith('*.') && h.endsWith(p.substring(1)) && !h.substring(0, h.size() - p.size() + 1).contains('.')))`
	return `request.resource.resource != 'ingresses' || request.operation == 'DELETE' ||
(object.spec.?rules.orValue([]).all(r, r.?host.hasValue() && [r.host].all(h, ` + allowed + `)) &&
 object.spec.?tls.orValue([]).all(t, t.?hosts.orValue([]).all(h, ` + allowed + `)))`
}

// serviceTypesExpression lets the identity create or update a Service only of type ClusterIP
// (headless included) or a listed type.
func serviceTypesExpression(types []corev1.ServiceType) string {
	list := []string{string(corev1.ServiceTypeClusterIP)}
	for _, t := range types {
		list = append(list, string(t))
	}
	return `request.resource.resource != 'services' || request.operation == 'DELETE' ||
object.spec.?type.orValue('ClusterIP') in [` + celStrings(list) + `]`
}
