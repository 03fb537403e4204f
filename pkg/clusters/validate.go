package clusters

import (
	"fmt"
	"reflect"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// InvalidContextError says why a context of the registration kubeconfig is refused. It names
// fields, never their values: those are credentials, file paths and commands.
type InvalidContextError struct {
	// Context is the context's name.
	Context string
	// Cluster and User are the entries the context names.
	Cluster, User string
	// Refused are the fields present that the registration does not accept, in kubeconfig
	// spelling and prefixed by the entry they are in: "cluster.proxy-url", "user.exec".
	Refused []string
	// Missing are the entries the context names that do not exist: "cluster", "user".
	Missing []string
}

func (e *InvalidContextError) Error() string {
	var parts []string
	for _, m := range e.Missing {
		entry := e.Cluster
		if m == "user" {
			entry = e.User
		}
		parts = append(parts, fmt.Sprintf("it names a %s entry %q that does not exist", m, entry))
	}
	if len(e.Refused) > 0 {
		parts = append(parts, "it uses "+strings.Join(e.Refused, ", "))
	}
	return fmt.Sprintf("context %q is refused: %s. A registered context may hold only server, certificate-authority-data and "+
		"tls-server-name (cluster) and token, client-certificate-data and client-key-data (user): nothing that runs a "+
		"command, reads a file or acts as someone else; register the cluster with `flotillactl cluster join`",
		e.Context, strings.Join(parts, "; "))
}

// ValidateContext checks a context of the registration kubeconfig against what Flotilla accepts
// there. The registration is data, not code: whoever may edit the Secret must not get a command
// run (exec, auth-provider), a file of the reader's machine sent (tokenFile, the certificate and
// key files, the manager's own ServiceAccount token among them), another identity assumed (as*)
// or the traffic routed elsewhere (proxy-url) by the manager or by the operator's flotillactl. So
// only the fields that carry inline data are accepted, and any other field, including one a later
// client-go adds, is refused. It is pure: the registry and every CLI read of the Secret call it.
// The error is an *InvalidContextError, or nil.
func ValidateContext(cfg *clientcmdapi.Config, contextName string) error {
	kctx, ok := cfg.Contexts[contextName]
	if !ok || kctx == nil {
		return fmt.Errorf("context %q is not in the registration kubeconfig", contextName)
	}
	e := &InvalidContextError{Context: contextName, Cluster: kctx.Cluster, User: kctx.AuthInfo}
	if c := cfg.Clusters[kctx.Cluster]; c == nil {
		e.Missing = append(e.Missing, "cluster")
	} else {
		e.Refused = append(e.Refused, refusedClusterFields(c)...)
	}
	if u := cfg.AuthInfos[kctx.AuthInfo]; u == nil {
		e.Missing = append(e.Missing, "user")
	} else {
		e.Refused = append(e.Refused, refusedUserFields(u)...)
	}
	if len(e.Refused) == 0 && len(e.Missing) == 0 {
		return nil
	}
	return e
}

// refusedClusterFields names the fields of a cluster entry other than server,
// certificate-authority-data and tls-server-name.
func refusedClusterFields(c *clientcmdapi.Cluster) []string {
	var out []string
	add := func(set bool, field string) {
		if set {
			out = append(out, "cluster."+field)
		}
	}
	add(c.CertificateAuthority != "", "certificate-authority")
	add(c.InsecureSkipTLSVerify, "insecure-skip-tls-verify")
	add(c.ProxyURL != "", "proxy-url")
	add(c.DisableCompression, "disable-compression")
	add(len(c.Extensions) > 0, "extensions")
	// Whatever else is set is a field this code does not know: refused too.
	rest := *c
	rest.LocationOfOrigin, rest.Server, rest.CertificateAuthorityData, rest.TLSServerName = "", "", nil, ""
	rest.CertificateAuthority, rest.InsecureSkipTLSVerify, rest.ProxyURL, rest.DisableCompression, rest.Extensions = "", false, "", false, nil
	add(!reflect.ValueOf(rest).IsZero(), "(a field unknown to Flotilla)")
	return out
}

// refusedUserFields names the fields of a user entry other than token, client-certificate-data
// and client-key-data.
func refusedUserFields(u *clientcmdapi.AuthInfo) []string {
	var out []string
	add := func(set bool, field string) {
		if set {
			out = append(out, "user."+field)
		}
	}
	add(u.ClientCertificate != "", "client-certificate")
	add(u.ClientKey != "", "client-key")
	add(u.TokenFile != "", "tokenFile")
	add(u.Impersonate != "", "as")
	add(u.ImpersonateUID != "", "as-uid")
	add(len(u.ImpersonateGroups) > 0, "as-groups")
	add(len(u.ImpersonateUserExtra) > 0, "as-user-extra")
	add(u.Username != "", "username")
	add(u.Password != "", "password")
	add(u.AuthProvider != nil, "auth-provider")
	add(u.Exec != nil, "exec")
	add(len(u.Extensions) > 0, "extensions")
	rest := *u
	rest.LocationOfOrigin, rest.Token, rest.ClientCertificateData, rest.ClientKeyData = "", "", nil, nil
	rest.ClientCertificate, rest.ClientKey, rest.TokenFile = "", "", ""
	rest.Impersonate, rest.ImpersonateUID, rest.ImpersonateGroups, rest.ImpersonateUserExtra = "", "", nil, nil
	rest.Username, rest.Password, rest.AuthProvider, rest.Exec, rest.Extensions = "", "", nil, nil, nil
	add(!reflect.ValueOf(rest).IsZero(), "(a field unknown to Flotilla)")
	return out
}

// RESTConfigFor builds the REST config of a context of the registration kubeconfig, after
// ValidateContext: the one way the manager and flotillactl reach a cluster with the registered
// credentials, so a refused context is never used.
func RESTConfigFor(cfg *clientcmdapi.Config, contextName string) (*rest.Config, error) {
	if err := ValidateContext(cfg, contextName); err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, contextName, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %q cannot be used: %w", contextName, err)
	}
	return rc, nil
}
