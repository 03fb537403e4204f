package kubeletapi

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// The subject of a kubelet serving certificate, as the kubernetes.io/kubelet-serving signer
// requires it (ValidateKubeletServingCSR): CN system:node:<node>, O exactly system:nodes.
const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// ServingCSR is what the approval of a virtual node's kubelet serving CSR is decided on: the CSR
// as the API server has it, and what the kubelet API knows of the one it created.
type ServingCSR struct {
	// CSR as read back from the API server: spec.username is who created it, set by the API server.
	CSR *certificatesv1.CertificateSigningRequest
	// UID the API server gave the CSR this kubelet API created.
	UID types.UID
	// Self is the manager's own user name (SelfSubjectReview).
	Self string
	// Key is the public key of the private key the kubelet API generated for this CSR.
	Key crypto.PublicKey
	// Node is the virtual node the certificate is for.
	Node string
	// Addresses are the addresses the manager advertises for its virtual nodes.
	Addresses []string
}

// ApproveServingCSR decides whether the manager approves a kubelet serving CSR. Serving CSRs are
// never approved by kube-controller-manager, and a certificate for system:node:<name> would let
// its holder stand in for that node to the API server's node proxy: the manager approves only
// the CSR it has just created itself (the UID its creation returned, created by the manager's
// own user, for the key it holds), for one of its own virtual nodes, naming only its own
// advertised addresses, with exactly a kubelet serving certificate's subject and usages, not yet
// decided. Anything else is left alone, with the reason.
func ApproveServingCSR(in ServingCSR) (bool, string) {
	csr := in.CSR
	switch {
	case csr == nil:
		return false, "no CSR"
	case in.UID == "" || csr.UID != in.UID:
		return false, fmt.Sprintf("CSR %s is not the one the manager created", csr.Name)
	case in.Self == "" || csr.Spec.Username != in.Self:
		return false, fmt.Sprintf("CSR %s was created by %q, not by the manager (%q)", csr.Name, csr.Spec.Username, in.Self)
	case csr.Spec.SignerName != certificatesv1.KubeletServingSignerName:
		return false, fmt.Sprintf("CSR %s asks signer %q, not %s", csr.Name, csr.Spec.SignerName, certificatesv1.KubeletServingSignerName)
	case len(csr.Status.Conditions) > 0:
		return false, fmt.Sprintf("CSR %s is already %s", csr.Name, csr.Status.Conditions[0].Type)
	}
	if _, ok := flotillav1.ClusterOfNode(in.Node); !ok {
		return false, fmt.Sprintf("%q is not a virtual node", in.Node)
	}
	req, why := parseRequest(csr.Spec.Request)
	if why != "" {
		return false, fmt.Sprintf("CSR %s: %s", csr.Name, why)
	}
	if why := subjectAndNames(req, in); why != "" {
		return false, fmt.Sprintf("CSR %s: %s", csr.Name, why)
	}
	if k, ok := req.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || in.Key == nil || !k.Equal(in.Key) {
		return false, fmt.Sprintf("CSR %s is not for the key the manager holds", csr.Name)
	}
	if !servingUsages(csr.Spec.Usages) {
		return false, fmt.Sprintf("CSR %s asks usages %v, not a kubelet serving certificate's", csr.Name, csr.Spec.Usages)
	}
	return true, ""
}

// parseRequest decodes a CSR's PEM request and checks its signature.
func parseRequest(raw []byte) (*x509.CertificateRequest, string) {
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, "the request is not a PEM certificate request"
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, "the request does not parse: " + err.Error()
	}
	if err := req.CheckSignature(); err != nil {
		return nil, "the request's signature is wrong: " + err.Error()
	}
	return req, ""
}

// subjectAndNames checks the subject (the node's user, the nodes' group) and the names: at least
// one IP, each one of the manager's addresses, no DNS name, email or URI.
func subjectAndNames(req *x509.CertificateRequest, in ServingCSR) string {
	if want := nodeUserPrefix + in.Node; req.Subject.CommonName != want {
		return fmt.Sprintf("common name %q, want %q", req.Subject.CommonName, want)
	}
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return fmt.Sprintf("organization %v, want [%s]", req.Subject.Organization, nodesGroup)
	}
	if len(req.DNSNames) > 0 || len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return fmt.Sprintf("names other than IP addresses: %v %v %v", req.DNSNames, req.EmailAddresses, req.URIs)
	}
	if len(req.IPAddresses) == 0 {
		return "no IP address"
	}
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(in.Addresses, func(a string) bool { return a == ip.String() }) {
			return fmt.Sprintf("IP address %s is not one the manager advertises (%v)", ip, in.Addresses)
		}
	}
	return ""
}

// servingUsages says whether usages are those of a kubelet serving certificate: digital
// signature and server auth (ECDSA), plus key encipherment (RSA), nothing else.
func servingUsages(usages []certificatesv1.KeyUsage) bool {
	set := map[certificatesv1.KeyUsage]bool{}
	for _, u := range usages {
		set[u] = true
	}
	ecdsa := set[certificatesv1.UsageDigitalSignature] && set[certificatesv1.UsageServerAuth]
	switch len(set) {
	case 2:
		return ecdsa
	case 3:
		return ecdsa && set[certificatesv1.UsageKeyEncipherment]
	}
	return false
}
