package kubeletapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/pki"
)

// DefaultSignTimeout is Server.SignTimeout when zero: how long a serving certificate's CSR may
// wait for its certificate (kube-controller-manager signs an approved one within a second; one
// without --cluster-signing-cert-file never does).
const DefaultSignTimeout = 30 * time.Second

// The serving certificates' own timings.
const (
	// fallbackValidity is the validity of a self-signed serving certificate.
	fallbackValidity = 365 * 24 * time.Hour
	// retryFirst and retryCap bound the wait between two CSRs while the cluster does not sign.
	retryFirst = time.Minute
	retryCap   = time.Hour
)

// servingCert is the certificate a virtual node's port serves: the cluster's, or a self-signed
// one while there is none.
type servingCert struct {
	mu   sync.RWMutex
	cert *tls.Certificate
}

func (c *servingCert) get() *tls.Certificate {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cert
}

func (c *servingCert) set(cert *tls.Certificate) {
	c.mu.Lock()
	c.cert = cert
	c.mu.Unlock()
}

// selfSigned issues a node's serving certificate from the process's own CA.
func (k *Server) selfSigned(ca *pki.CA, node string) (*tls.Certificate, error) {
	var ips []net.IP
	if ip := net.ParseIP(k.Address); ip != nil {
		ips = append(ips, ip)
	}
	kp, err := ca.IssueServer([]string{"localhost", node}, ips, k.now(), fallbackValidity)
	if err != nil {
		return nil, fmt.Errorf("issuing a self-signed serving certificate for %s: %w", node, err)
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the self-signed serving certificate of %s: %w", node, err)
	}
	return &cert, nil
}

// keepCertificate gets a node's serving certificate from the cluster's CSR API and renews it at
// two thirds of its life, until ctx ends. While the cluster does not sign, the node keeps its
// self-signed certificate: said once in a log line and a Warning Event on the node, and asked
// again after a growing wait (one minute to one hour).
//
// Not client-go's util/certificate.Manager, which rotates a kubelet's certificate the same way:
// between creating the CSR and waiting for it, this server approves its own request
// (kube-controller-manager approves no kubelet-serving CSR, and a real kubelet waits for an
// approver the cluster must run); and while none is signed it must go on serving a certificate
// and say why on the node. The Manager has no step between the request and the wait, serves no
// certificate until one is signed, and reports a failure only in its log.
func (k *Server) keepCertificate(ctx context.Context, node *corev1.Node, c *servingCert) {
	backoff := wait.Backoff{Duration: retryFirst, Factor: 2, Cap: retryCap, Steps: 1 << 30}
	selfSigned := false
	for {
		cert, err := k.requestCertificate(ctx, node.Name)
		var next time.Duration
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			next = backoff.Step()
			if !selfSigned {
				k.Log.Info("The cluster's CSR API gave no serving certificate for a virtual node: it serves a self-signed one", "node", node.Name,
					"error", err.Error(), "retryIn", next.String())
				k.event(node, corev1.EventTypeWarning, flotillav1.ReasonKubeletCertificateSelfSigned,
					"Serving the kubelet API with a self-signed certificate: the cluster's CSR API (signer %s) gave none: %v",
					certificatesv1.KubeletServingSignerName, err)
			}
			selfSigned = true
		default:
			c.set(cert)
			k.Log.Info("Serving a virtual node's kubelet API with a certificate of the cluster's CSR API", "node", node.Name,
				"notAfter", cert.Leaf.NotAfter)
			if selfSigned {
				k.event(node, corev1.EventTypeNormal, flotillav1.ReasonKubeletCertificateIssued,
					"Serving the kubelet API with a certificate of the cluster's CSR API (signer %s)", certificatesv1.KubeletServingSignerName)
			}
			selfSigned = false
			backoff = wait.Backoff{Duration: retryFirst, Factor: 2, Cap: retryCap, Steps: 1 << 30}
			next = max(time.Minute, cert.Leaf.NotBefore.Add(cert.Leaf.NotAfter.Sub(cert.Leaf.NotBefore)*2/3).Sub(k.now()))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// event records an Event on a virtual node, when there is a recorder.
func (k *Server) event(node *corev1.Node, kind, reason, note string, args ...any) {
	if k.Recorder != nil {
		k.Recorder.Eventf(node, nil, kind, reason, "ServeKubeletAPI", note, args...)
	}
}

// requestCertificate asks the cluster for a node's serving certificate: a new key, a
// kubernetes.io/kubelet-serving CSR, approved by this server if ApproveServingCSR says so, then
// the certificate, waited for at most SignTimeout. A CSR that gives none is deleted.
func (k *Server) requestCertificate(ctx context.Context, node string) (*tls.Certificate, error) {
	self, err := k.self.get(ctx, k.Primary)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(k.Address)
	if ip == nil {
		return nil, fmt.Errorf("the node address %q is not an IP", k.Address)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	der, err := certutil.MakeCSR(key, &pkix.Name{CommonName: nodeUserPrefix + node, Organization: []string{nodesGroup}}, nil, []net.IP{ip})
	if err != nil {
		return nil, fmt.Errorf("making the CSR of %s: %w", node, err)
	}
	csrs := k.Primary.CertificatesV1().CertificateSigningRequests()
	created, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "flotilla-" + node + "-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: der, SignerName: certificatesv1.KubeletServingSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the serving CSR of %s: %w", node, err)
	}
	cert, err := k.approveAndWait(ctx, created, self, key, node)
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		_ = csrs.Delete(dctx, created.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}})
		return nil, err
	}
	return cert, nil
}

// approveAndWait approves the CSR just created, if ApproveServingCSR says so, and waits for its
// certificate.
func (k *Server) approveAndWait(ctx context.Context, created *certificatesv1.CertificateSigningRequest, self string, key *ecdsa.PrivateKey, node string) (*tls.Certificate, error) {
	csrs := k.Primary.CertificatesV1().CertificateSigningRequests()
	got, err := csrs.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading back CSR %s: %w", created.Name, err)
	}
	if ok, why := ApproveServingCSR(ServingCSR{CSR: got, UID: created.UID, Self: self, Key: &key.PublicKey, Node: node,
		Addresses: []string{k.Address}}); !ok {
		return nil, fmt.Errorf("not approving: %s", why)
	}
	got.Status.Conditions = append(got.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: flotillav1.ReasonVirtualNodeServingCertificate,
		Message: "Approved by the Flotilla manager that created it, for its virtual node " + node})
	if _, err := csrs.UpdateApproval(ctx, got.Name, got, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("approving CSR %s: %w", got.Name, err)
	}
	signTimeout := k.SignTimeout
	if signTimeout == 0 {
		signTimeout = DefaultSignTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, signTimeout)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, k.Primary, got.Name, got.UID)
	if err != nil {
		return nil, fmt.Errorf("waiting %s for CSR %s to be signed: %w", signTimeout, got.Name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return nil, fmt.Errorf("loading the certificate of CSR %s: %w", got.Name, err)
	}
	if cert.Leaf == nil || cert.Leaf.Subject.CommonName != nodeUserPrefix+node || !k.now().Before(cert.Leaf.NotAfter) {
		return nil, fmt.Errorf("the certificate of CSR %s is not a live one for %s", got.Name, node)
	}
	return &cert, nil
}

// selfName is the manager's user name, asked once (SelfSubjectReview, which every authenticated
// user may create).
type selfName struct {
	mu   sync.Mutex
	name string
}

func (s *selfName) get(ctx context.Context, c kubernetes.Interface) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.name != "" {
		return s.name, nil
	}
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the API server who the manager is: %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", errors.New("the API server says the manager has no user name")
	}
	s.name = r.Status.UserInfo.Username
	return s.name, nil
}
