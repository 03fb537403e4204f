package cli

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/config"
	"github.com/flotilla-dev/flotilla/internal/dryrun"
	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

func newClusterCommand(g *GlobalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Register, list, drain, remove and fence secondary clusters",
		Long: `Secondary clusters are registered in the primary's Secret flotilla-system/kubeconfig (key
config), one context per cluster. The manager picks up every change within seconds: each
secondary becomes a virtual node flotilla-<name> and a ClusterDetector.

The primary is --context (default: the current context); secondaries are other contexts
of the same kubeconfig. Credentials are never printed.`,
	}
	cmd.AddCommand(newJoinCommand(g), newAddCommand(g), newListCommand(g), newDrainCommand(g), newUncordonCommand(g),
		newRemoveCommand(g), newFenceCommand(g), newReplaceCommand(g))
	return cmd
}

// secondaryContext loads the user's kubeconfig and finds the secondary's context and its cluster name.
func (g *GlobalOptions) secondaryContext(contextName, name string) (*clientcmdapi.Config, *clientcmdapi.Context, string, error) {
	user, err := g.userConfig()
	if err != nil {
		return nil, nil, "", err
	}
	name, err = nameFor(contextName, name)
	if err != nil {
		return nil, nil, "", err
	}
	kctx, ok := user.Contexts[contextName]
	if !ok {
		return nil, nil, "", fmt.Errorf("context %q is not in the kubeconfig", contextName)
	}
	return user, kctx, name, nil
}

// nameFor returns the cluster name for a context: --name when given (validated), else derived.
func nameFor(contextName, name string) (string, error) {
	if name == "" {
		return clusters.ClusterName(contextName), nil
	}
	if !clusters.ValidClusterName(name) {
		return "", fmt.Errorf("--name %q: a cluster name must be a DNS-1123 label (lower case letters, digits and '-') of at most %d characters",
			name, clusters.MaxClusterNameLength)
	}
	return name, nil
}

// refuseDuplicate fails when the registration already has a context named name for another cluster.
// A name whose registered cluster the manager recorded as this very one (same kube-system UID in its
// ClusterDetector) only moves to the new address: the same cluster reached another way.
func refuseDuplicate(ctx context.Context, primary client.Client, reg *clientcmdapi.Config, name, server, id string) error {
	var cd flotillav1.ClusterDetector
	err := primary.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}, &cd)
	if err == nil && cd.Status.ClusterID != "" && cd.Status.ClusterID == id {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading ClusterDetector %s: %w", name, err)
	}
	if kctx, ok := reg.Contexts[name]; ok {
		if c := reg.Clusters[kctx.Cluster]; c != nil && c.Server != server {
			return fmt.Errorf("cluster name %q is already registered for %s; choose another --name or remove it first", name, c.Server)
		}
	}
	return nil
}

func newAddCommand(g *GlobalOptions) *cobra.Command {
	var contextName, name, server, storageClass string
	cmd := &cobra.Command{
		Use:   "add --secondary-context CONTEXT [--name NAME]",
		Short: "Register a secondary with the credentials of its kubeconfig context (plumber's way)",
		Long: `add copies the context's own cluster and user entries into the registration Secret. It refuses
credentials the manager cannot use in the primary (exec plugins, auth providers): use join for those.
add also installs the FlotillaPrimary CRD there with the same credentials.`,
		Example: "  flotillactl cluster add --secondary-context secondary1\n  flotillactl cluster add --secondary-context kind-eu --server https://eu.internal:6443",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkStorageClass(storageClass); err != nil {
				return err
			}
			if contextName = g.secondaryContextName(contextName, true, cmd.ErrOrStderr()); contextName == "" {
				return errors.New("--secondary-context is required: the secondary's context in your kubeconfig")
			}
			return runAdd(cmd.Context(), g, contextName, name, server, storageClass, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&contextName, "secondary-context", "", "kubeconfig context of the secondary (required)")
	cmd.Flags().StringVar(&name, "name", "", "cluster name (DNS-1123; default: derived from the context name)")
	cmd.Flags().StringVar(&server, "server", "", serverFlagHelp)
	cmd.Flags().StringVar(&storageClass, "storage-class", "", storageClassFlagHelp)
	return cmd
}

func runAdd(ctx context.Context, g *GlobalOptions, contextName, name, server, storageClass string, out io.Writer) error {
	user, kctx, name, err := g.secondaryContext(contextName, name)
	if err != nil {
		return err
	}
	authInfo := user.AuthInfos[kctx.AuthInfo]
	if authInfo == nil || user.Clusters[kctx.Cluster] == nil {
		return fmt.Errorf("context %q names a missing cluster or user entry", contextName)
	}
	if authInfo.Exec != nil || authInfo.AuthProvider != nil {
		return fmt.Errorf("context %q %w", contextName, errExecCredential)
	}
	cluster, err := registeredCluster(user.Clusters[kctx.Cluster], server)
	if err != nil {
		return err
	}
	cluster, authInfo, err = registrableEntries(contextName, cluster, authInfo)
	if err != nil {
		return err
	}
	primary, _, err := clientFor(user, g.primaryContext())
	if err != nil {
		return err
	}
	secondary, _, err := clientFor(user, contextName)
	if err != nil {
		return err
	}
	if err := checkServer(ctx, user, contextName, server, secondary, out); err != nil {
		return err
	}
	if w := loopbackWarning(cluster.Server); w != "" {
		if _, err := fmt.Fprint(out, w); err != nil {
			return err
		}
	}
	secondaryID, err := clusters.ClusterID(ctx, secondary)
	if err != nil {
		return fmt.Errorf("context %s: %w", contextName, err)
	}
	if err := installCRD(ctx, secondary, "flotillaprimaries"); err != nil {
		return err
	}
	err = updateRegistration(ctx, primary, func(r *clusters.Registration) error {
		if err := refuseDuplicate(ctx, primary, r.Config, name, cluster.Server, secondaryID); err != nil {
			return err
		}
		putContext(r.Config, name, cluster, kctx.Cluster, authInfo, kctx.AuthInfo)
		delete(r.Removed, name)      // registered again
		r.Pinned[name] = secondaryID // the identity read with the operator's credentials
		setStorageClass(r, name, storageClass)
		return nil
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Registered context %s as cluster %s at %s (virtual node %s).\n", contextName, name, cluster.Server, flotillav1.VirtualNodeName(name))
	return err
}

func newJoinCommand(g *GlobalOptions) *cobra.Command {
	var contextName, name, server, storageClass string
	var duration time.Duration
	var namespaces, ingressHosts, serviceTypes []string
	var pull pullOptions
	var allow map[string]string
	var kinds []string
	var crds bool
	var consumerRole string
	cmd := &cobra.Command{
		Use:   "join --secondary-context CONTEXT [--name NAME] [--namespaces NAME,PREFIX-*] [--ingress-hosts HOST,*.DOMAIN] [--service-types TYPE] [--allow pods=N,cpu=Q,...] [--kinds RESOURCE.GROUP,... [--crds]] [--consumer-role multikueue|CLUSTERROLE]",
		Short: "Register a secondary with a least-privilege identity of Flotilla's own",
		Long: `join uses the context's (admin) credentials once, to install in the secondary:
  - the FlotillaPrimary CRD and this primary's FlotillaPrimary object;
  - a ServiceAccount flotilla-system/flotilla-<primary id>, its least-privilege RBAC (no reads of
    Secrets, no RBAC objects), and a ValidatingAdmissionPolicy that lets it write only in
    namespaces labelled flotilla.dev/managed-by=<primary id>, and with --namespaces only in
    namespaces of the names (web) and prefixes (team-*) listed: it may neither create nor write
    in any other, so a tenant's namespace named like a tool of that cluster (cert-manager) is not
    made there first. Without --namespaces every name is allowed but kube-*, default and
    flotilla-system; running join again with another list (or none) replaces the list.
    The policy never lets it write an Ingress with a snippet annotation; with --ingress-hosts
    only Ingresses for the hosts listed (a name, or *.domain for one label under it), and then
    with --service-types only Services of type ClusterIP or of the types listed (NodePort,
    LoadBalancer, ExternalName): copies of the primary's Ingresses and Services must not claim
    this cluster's hosts or load balancers unless you allow it. Without them any host and type;
then mints a token for that ServiceAccount and registers it in the primary's Secret. The manager
renews the token at half its lifetime through the secondary itself, so with the default 7 days a
secondary may be unreachable for up to 3.5 days; one that stayed away longer shows TokenExpired in
its ClusterDetector, and running join again (same context, same name) mints a new token. Running
join again is always safe. This works for contexts whose own credentials the manager cannot use
(GKE, EKS, AKS exec plugins).

With --pull the manager never dials the cluster: its agent dials out to the primary's tunnel
endpoint (--tunnel-address, whose certificate --tunnel-ca-file's CA signed) and carries the
manager's connections. join then also makes the primary's ServiceAccount
flotilla-system/flotilla-agent-<name> (no role: its tokens prove the cluster to the endpoint),
writes a bootstrap token of it (--agent-token-duration, bound to the primary's Secret
flotilla-agent-bootstrap-<name>) and the CA into the secondary's Secret
flotilla-system/flotilla-agent, lets the manager's identity there replace that Secret (and no
other), marks the cluster pulled in the registration, and prints the helm command that starts the
agent. Once the agent connects, the manager gives it a credential of its own, renewed before it
expires, and deletes the bootstrap Secret, which ends the bootstrap token.

A Replicator writes the built-in kinds it handles (ConfigMaps, Secrets, Services, Ingresses,
workloads, ServiceAccounts, PodDisruptionBudgets, HorizontalPodAutoscalers, NetworkPolicies)
wherever it is allowed to write at all. Any other kind (a custom resource) it writes only where
this cluster's admin allowed it with --kinds; with --crds the primary may also create and update
those kinds' CustomResourceDefinitions, never another's, never one it did not create, and never
delete one.

The fleet's inventory (ClusterProfiles, with the token Secret their access provider reads in each
reader's namespace: MultiKueue, Argo CD) lets its readers reach this cluster as Flotilla's
identity, with its rights and fence. With --consumer-role they reach it instead as a
ServiceAccount of their own, flotilla-system/flotilla-<primary id>-consumer, bound to the
ClusterRole you name, or with multikueue to one join makes with what a MultiKueue manager needs in
a worker (Jobs, pods and Kueue Workloads, cluster-wide); Flotilla's identity may mint that
account's tokens and nothing else of it. Joining again without it removes that account.`,
		Example: "  flotillactl cluster join --secondary-context secondary1 --name eu-west\n" +
			"  # a local cluster whose kubeconfig says 127.0.0.1, for a manager running in a pod:\n" +
			"  flotillactl cluster join --secondary-context kind-eu --server https://192.168.1.20:6443\n" +
			"  # only namespace web and those whose names start with team-:\n" +
			"  flotillactl cluster join --secondary-context secondary1 --namespaces web,team-*\n" +
			"  # Ingresses only under eu.example.com, and no Service beyond ClusterIP:\n" +
			"  flotillactl cluster join --secondary-context secondary1 --ingress-hosts '*.eu.example.com'\n" +
			"  # Replicators may also carry ServiceMonitors, and copy their definition here:\n" +
			"  flotillactl cluster join --secondary-context secondary1 --kinds servicemonitors.monitoring.coreos.com --crds\n" +
			"  # MultiKueue in the primary may dispatch Jobs here through Flotilla's ClusterProfile:\n" +
			"  flotillactl cluster join --secondary-context secondary1 --consumer-role multikueue\n" +
			"  # a cluster the primary cannot reach, whose agent dials the primary's tunnel:\n" +
			"  flotillactl cluster join --secondary-context edge --pull --tunnel-address tunnel.example.com:8444 --tunnel-ca-file tunnel-ca.crt",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkStorageClass(storageClass); err != nil {
				return err
			}
			if err := pull.check(); err != nil {
				return err
			}
			lent, err := parseAllowance(allow)
			if err != nil {
				return fmt.Errorf("--allow: %w", err)
			}
			allowed, err := parseKinds(kinds, crds)
			if err != nil {
				return err
			}
			if contextName = g.secondaryContextName(contextName, true, cmd.ErrOrStderr()); contextName == "" {
				return errors.New("--secondary-context is required: the secondary's context in your kubeconfig, with rights to install CRDs and RBAC")
			}
			return runJoin(cmd.Context(), g, joinOptions{contextName: contextName, name: name, server: server, duration: duration,
				namespaces: namespaces, exposure: exposureOf(ingressHosts, serviceTypes), storageClass: storageClass, pull: pull,
				allowance: lent, kinds: allowed, crds: crds, consumerRole: consumerRole}, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&contextName, "secondary-context", "", "kubeconfig context of the secondary, with rights to install CRDs and RBAC (required)")
	cmd.Flags().StringVar(&name, "name", "", "cluster name (DNS-1123; default: derived from the context name)")
	cmd.Flags().StringVar(&server, "server", "", serverFlagHelp)
	cmd.Flags().StringVar(&storageClass, "storage-class", "", storageClassFlagHelp)
	cmd.Flags().DurationVar(&duration, "token-duration", 7*24*time.Hour,
		"lifetime of the token minted for Flotilla (the secondary may cap it); renewed at half of it, so the longest outage it survives is half of it")
	cmd.Flags().StringSliceVar(&namespaces, "namespaces", nil,
		"the only namespaces Flotilla may create and write in there: names and prefixes (team-*), comma-separated (default: every name but kube-*, default, flotilla-system)")
	cmd.Flags().StringSliceVar(&ingressHosts, "ingress-hosts", nil,
		"the only Ingress hosts Flotilla may create there: names and *.domain, comma-separated (default: any host)")
	cmd.Flags().StringSliceVar(&serviceTypes, "service-types", nil,
		"the Service types beyond ClusterIP Flotilla may create there: NodePort, LoadBalancer, ExternalName (default: any type; with --ingress-hosts, none)")
	cmd.Flags().StringToStringVar(&allow, "allow", nil,
		"the most this primary may use of the secondary, over every namespace it manages there: RESOURCE=QUANTITY pairs, comma-separated (pods=50,cpu=16,memory=64Gi,nvidia.com/gpu=4); "+
			"written as the PrimaryAllowance named by the primary's ID, which the secondary's admin edits afterwards and the primary may only read. "+
			"The secondary's lender (the chart's role secondary) holds the primary to it with ResourceQuotas; a cap on cpu or memory refuses pods that do not request them. "+
			"Joining again without it leaves the allowance as it is (delete the PrimaryAllowance to lend without limit)")
	cmd.Flags().StringSliceVar(&kinds, "kinds", nil,
		"further kinds this primary's Replicators may write there, beyond the built-in ones: RESOURCE.GROUP, comma-separated, as a CustomResourceDefinition is named "+
			"(servicemonitors.monitoring.coreos.com,externalsecrets.external-secrets.io); fenced to its managed namespaces like the others. Joining again replaces the list")
	cmd.Flags().BoolVar(&crds, "crds", false,
		"with --kinds: let the primary also create and update the CustomResourceDefinitions of those kinds (a Replicator's replicateCRDs), only those and only as it made them; it never deletes one")
	cmd.Flags().StringVar(&consumerRole, "consumer-role", "",
		"the ClusterRole the fleet inventory's readers get here, as a ServiceAccount of their own whose tokens only Flotilla mints: a ClusterRole of this cluster, "+
			"or multikueue for what a MultiKueue manager needs in a worker (default: they reach it as Flotilla's identity). Joining again without it removes that account")
	cmd.Flags().BoolVar(&pull.enabled, "pull", false,
		"the manager cannot reach this cluster: register it in pull mode, reached only through the tunnel its agent dials out to the primary (docs/pull-mode.md); needs --tunnel-address and --tunnel-ca-file. Joining again without it registers the cluster as dialled again")
	cmd.Flags().StringVar(&pull.address, "tunnel-address", "", "with --pull: HOST:PORT of the primary's tunnel endpoint as the secondary reaches it (the chart's tunnel.* in the primary)")
	cmd.Flags().StringVar(&pull.caFile, "tunnel-ca-file", "", "with --pull: PEM file of the CA that signed the tunnel endpoint's certificate, given to the agent")
	cmd.Flags().DurationVar(&pull.tokenDuration, "agent-token-duration", time.Hour,
		"with --pull: lifetime of the agent's bootstrap credential (a token of the primary's ServiceAccount flotilla-system/flotilla-agent-<name>, bound to the Secret flotilla-agent-bootstrap-<name> there): the agent must first connect within it; the manager then gives it a credential of its own, renewed before it expires, and deletes that Secret, which ends the bootstrap one")
	return cmd
}

// pullOptions are join's --pull and the flags that go with it.
type pullOptions struct {
	enabled         bool
	address, caFile string
	tokenDuration   time.Duration
	ca              []byte
}

// check refuses --pull without what the agent needs, and the tunnel's flags without --pull.
func (p *pullOptions) check() error {
	if !p.enabled {
		if p.address != "" || p.caFile != "" {
			return errors.New("--tunnel-address and --tunnel-ca-file go with --pull")
		}
		return nil
	}
	var errs []error
	if _, port, err := net.SplitHostPort(p.address); err != nil || port == "" {
		errs = append(errs, fmt.Errorf("--pull needs --tunnel-address HOST:PORT of the primary's tunnel endpoint, not %q", p.address))
	}
	if p.caFile == "" {
		errs = append(errs, errors.New("--pull needs --tunnel-ca-file, the CA of the tunnel endpoint's certificate"))
	} else if raw, err := os.ReadFile(p.caFile); err != nil {
		errs = append(errs, fmt.Errorf("--tunnel-ca-file: %w", err))
	} else if !x509.NewCertPool().AppendCertsFromPEM(raw) {
		errs = append(errs, fmt.Errorf("--tunnel-ca-file %s holds no PEM certificate", p.caFile))
	} else {
		p.ca = raw
	}
	if p.tokenDuration < 10*time.Minute {
		errs = append(errs, fmt.Errorf("--agent-token-duration %s: at least 10m", p.tokenDuration))
	}
	return errors.Join(errs...)
}

// exposureOf is join's --ingress-hosts and --service-types.
func exposureOf(hosts, types []string) access.Exposure {
	e := access.Exposure{IngressHosts: hosts}
	for _, t := range types {
		e.ServiceTypes = append(e.ServiceTypes, corev1.ServiceType(t))
	}
	return e
}

// joinOptions are join's flags.
type joinOptions struct {
	contextName, name, server string
	storageClass              string
	duration                  time.Duration
	namespaces                access.Namespaces
	exposure                  access.Exposure
	pull                      pullOptions
	// allowance is --allow: the most the primary may use of the secondary (nil: not stated).
	allowance corev1.ResourceList
	// kinds and crds are --kinds and --crds: further kinds Replicators may write there.
	kinds []schema.GroupResource
	crds  bool
	// consumerRole is --consumer-role: the ClusterRole the inventory's readers get ("" none).
	consumerRole string
}

// joinableCluster is the cluster entry join registers for a context: the context's own, at
// --server when given, checked (with --namespaces) before anything is made in the secondary; the
// token minted later is the only user field.
func joinableCluster(user *clientcmdapi.Config, kctx *clientcmdapi.Context, contextName string, o joinOptions) (*clientcmdapi.Cluster, error) {
	if user.Clusters[kctx.Cluster] == nil {
		return nil, fmt.Errorf("context %q names a missing cluster entry", contextName)
	}
	cluster, err := registeredCluster(user.Clusters[kctx.Cluster], o.server)
	if err != nil {
		return nil, err
	}
	if err := o.namespaces.Validate(); err != nil {
		return nil, fmt.Errorf("--namespaces: %w", err)
	}
	if err := o.exposure.Validate(); err != nil {
		return nil, fmt.Errorf("--ingress-hosts or --service-types: %w", err)
	}
	cluster, _, err = registrableEntries(contextName, cluster, &clientcmdapi.AuthInfo{})
	return cluster, err
}

func runJoin(ctx context.Context, g *GlobalOptions, o joinOptions, out io.Writer) error {
	contextName := o.contextName
	user, kctx, name, err := g.secondaryContext(contextName, o.name)
	if err != nil {
		return err
	}
	cluster, err := joinableCluster(user, kctx, contextName, o)
	if err != nil {
		return err
	}
	primary, _, err := clientFor(user, g.primaryContext())
	if err != nil {
		return err
	}
	secondary, secondaryRC, err := clientFor(user, contextName)
	if err != nil {
		return err
	}
	primaryID, err := clusters.ClusterID(ctx, primary)
	if err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	secondaryID, err := clusters.ClusterID(ctx, secondary)
	if err != nil {
		return fmt.Errorf("context %s: %w", contextName, err)
	}
	if secondaryID == primaryID {
		return fmt.Errorf("context %q is the primary itself; only secondaries are joined", contextName)
	}
	if err := checkServer(ctx, user, contextName, o.server, secondary, out); err != nil {
		return err
	}
	if w := loopbackWarning(cluster.Server); w != "" && !o.pull.enabled {
		if _, err := fmt.Fprint(out, w); err != nil {
			return err
		}
	}
	names := access.NamesFor(primaryID)
	if err := prepareConsumer(ctx, secondary, names, o.consumerRole); err != nil {
		return fmt.Errorf("context %s: --consumer-role: %w", contextName, err)
	}
	if err := installAccess(ctx, secondary, contextName, names, name, access.Limits{Namespaces: o.namespaces,
		Exposure: o.exposure, Pull: o.pull.enabled, Allowance: o.allowance, Kinds: o.kinds, Definitions: o.crds, ConsumerRole: o.consumerRole}); err != nil {
		return err
	}
	if err := removeConsumer(ctx, secondary, names, o.consumerRole); err != nil {
		return fmt.Errorf("context %s: %w", contextName, err)
	}
	cs, err := kubernetes.NewForConfig(secondaryRC)
	if err != nil {
		return fmt.Errorf("context %s: %w", contextName, err)
	}
	seconds := int64(o.duration.Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(flotillav1.SystemNamespace).CreateToken(ctx, names.ServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("minting a token for %s in context %s: %w", names.ServiceAccount, contextName, err)
	}
	identity := &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	err = updateRegistration(ctx, primary, func(r *clusters.Registration) error {
		if err := refuseDuplicate(ctx, primary, r.Config, name, cluster.Server, secondaryID); err != nil {
			return err
		}
		putContext(r.Config, name, cluster, kctx.Cluster, identity, names.ServiceAccount+"@"+name)
		delete(r.Removed, name) // registered again
		// Pinned to what the operator's own credentials reached: joining again is how the
		// manager accepts a cluster rebuilt behind the same URL (IdentityChanged).
		r.Pinned[name] = secondaryID
		setStorageClass(r, name, o.storageClass)
		setMode(r, name, o.pull.enabled)
		return nil
	})
	if err != nil {
		return err
	}
	if err := joinPulled(ctx, primary, secondary, contextName, name, names, o.pull, out); err != nil {
		return err
	}
	return printJoined(out, contextName, name, cluster.Server, names, tr.Status.ExpirationTimestamp.Time, o.namespaces, o.allowance)
}

// prepareConsumer checks the ClusterRole --consumer-role names exists, and deletes the readers'
// binding of this primary when it binds another role (a binding's role cannot change).
func prepareConsumer(ctx context.Context, secondary client.Client, names access.Names, role string) error {
	if role == "" {
		return nil
	}
	want := role
	if role == access.ConsumerRoleMultiKueue {
		want = names.MultiKueueRole
	} else if err := secondary.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no ClusterRole %s in this cluster: name one of its ClusterRoles, or multikueue", role)
		}
		return fmt.Errorf("reading ClusterRole %s: %w", role, err)
	}
	var binding rbacv1.ClusterRoleBinding
	switch err := secondary.Get(ctx, client.ObjectKey{Name: names.Consumer}, &binding); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading ClusterRoleBinding %s: %w", names.Consumer, err)
	case binding.RoleRef.Name == want || binding.Labels[flotillav1.LabelPrimary] != names.PrimaryID:
		return nil
	}
	uid := binding.UID
	return client.IgnoreNotFound(secondary.Delete(ctx, &binding, client.Preconditions{UID: &uid}))
}

// removeConsumer removes what --consumer-role made and is no longer asked for: without it the
// readers' account, binding and MultiKueue role; with a role of the cluster's own, the MultiKueue
// role.
func removeConsumer(ctx context.Context, secondary client.Client, names access.Names, role string) error {
	switch role {
	case access.ConsumerRoleMultiKueue:
		return nil
	case "":
		if err := removeOurs(ctx, secondary, names, access.ConsumerObjects(names, access.ConsumerRoleMultiKueue)); err != nil {
			return fmt.Errorf("removing the inventory readers' account: %w", err)
		}
		return nil
	default:
		if err := removeOurs(ctx, secondary, names, []client.Object{&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: names.MultiKueueRole}}}); err != nil {
			return fmt.Errorf("removing the MultiKueue role: %w", err)
		}
		return nil
	}
}

// installAccess applies in the secondary what join makes there for this primary: Flotilla's
// CRDs of a secondary (PrimaryAllowance's before the objects: the allowance policy takes one as
// its parameter), then the identity, its RBAC, the fence and the FlotillaPrimary.
func installAccess(ctx context.Context, secondary client.Client, contextName string, names access.Names, name string, limits access.Limits) error {
	for _, plural := range []string{"flotillaprimaries", "primaryallowances"} {
		if err := installCRD(ctx, secondary, plural); err != nil {
			return err
		}
	}
	for _, obj := range access.Objects(names, name, limits) {
		if err := apply(ctx, secondary, obj); err != nil {
			return fmt.Errorf("context %s: %w", contextName, err)
		}
	}
	return nil
}

// printJoined says what join registered and where Flotilla may write.
func printJoined(out io.Writer, contextName, name, server string, names access.Names, expires time.Time, namespaces access.Namespaces,
	allowance corev1.ResourceList) error {
	_, err := fmt.Fprintf(out, "Joined context %s as cluster %s at %s (virtual node %s) with identity %s; token expires %s.\n",
		contextName, name, server, flotillav1.VirtualNodeName(name), names.Username(), expires.UTC().Format(time.RFC3339))
	if err != nil {
		return err
	}
	allowed := "every name but kube-*, default and " + flotillav1.SystemNamespace + " (--namespaces to list them)"
	if len(namespaces) > 0 {
		allowed = "only " + namespaces.String()
	}
	_, err = fmt.Fprintf(out, "Namespaces Flotilla may use in %s: %s.\n", name, allowed)
	if err != nil || allowance == nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Cluster %s lends this primary at most %s (PrimaryAllowance %s there; its lender holds the primary to it).\n",
		name, allowanceString(allowance), names.PrimaryID)
	return err
}

// installCRD creates or updates one of Flotilla's CRDs (by plural name) from the embedded manifests.
func installCRD(ctx context.Context, c client.Client, plural string) error {
	raw, err := config.CRDs.ReadFile("crd/bases/" + flotillav1.GroupVersion.Group + "_" + plural + ".yaml")
	if err != nil {
		return fmt.Errorf("reading the %s CRD: %w", plural, err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return fmt.Errorf("decoding the %s CRD: %w", plural, err)
	}
	if err := apply(ctx, c, &crd); err != nil {
		return err
	}
	// Wait until it is served, so objects of it can be created next.
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got); err != nil {
			return false, nil //nolint:nilerr // not visible yet
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// apply creates obj or updates it to the desired content (labels, and spec-like fields).
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	desired := obj.DeepCopyObject().(client.Object)
	_, err := controllerutil.CreateOrUpdate(ctx, c, obj, func() error {
		return copyDesired(obj, desired)
	})
	if err != nil {
		return fmt.Errorf("applying %T %s: %w", desired, desired.GetName(), err)
	}
	return nil
}

func newListCommand(g *GlobalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the registered clusters and their status",
		Example: `  flotillactl cluster list
  flotillactl --context primary cluster list -o wide
  flotillactl cluster list -o json | jq -r '.items[] | select(.status != "Running") | .name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "wide", "json", "yaml"); err != nil {
				return err
			}
			return runList(cmd.Context(), g, cmd.OutOrStdout(), output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide (with version, nodes, message), json or yaml (every column of wide, one object per cluster under items)")
	return cmd
}

func runList(ctx context.Context, g *GlobalOptions, out io.Writer, output string) error {
	user, err := g.userConfig()
	if err != nil {
		return err
	}
	primary, _, err := clientFor(user, g.primaryContext())
	if err != nil {
		return err
	}
	return listClusters(ctx, primary, out, output)
}

// modeColumn says how the manager reaches a context's cluster: push (it dials it), or pull with
// its tunnel's state as the leader last reported it.
func modeColumn(st flotillav1.ClusterDetectorStatus) string {
	if st.Mode != flotillav1.ModePull {
		return "push"
	}
	switch t := st.Tunnel; {
	case t == nil:
		return "pull"
	case t.Connected && t.RoundTrip != nil:
		return "pull, tunnel up (" + t.RoundTrip.Duration.String() + ")"
	case t.Connected:
		return "pull, tunnel up"
	default:
		return "pull, no tunnel"
	}
}

// clusterRow is one registered context as cluster list shows it: the table's columns (wide's
// too), and the whole row in json and yaml.
type clusterRow struct {
	Context      string `json:"context"`
	Cluster      string `json:"cluster"`
	User         string `json:"user"`
	Name         string `json:"name"`
	Role         string `json:"role"`
	Status       string `json:"status"`
	Reason       string `json:"reason"`
	StorageClass string `json:"storageClass"`
	Mode         string `json:"mode"`
	Version      string `json:"version"`
	Nodes        int32  `json:"nodes"`
	Message      string `json:"message"`
	// Refused says what the registration refuses of the context ("": nothing).
	Refused string `json:"refused"`
}

// clusterRows reads the registered contexts with their ClusterDetector's status. A context the
// registration refuses (clusters.ValidateContext) shows InvalidContext and what is refused,
// whether or not a manager has reported it yet.
func clusterRows(ctx context.Context, primary client.Reader) ([]clusterRow, error) {
	reg, err := clusters.ReadRegistration(ctx, primary)
	if err != nil {
		return nil, err
	}
	var detectors flotillav1.ClusterDetectorList
	if err := primary.List(ctx, &detectors, client.InNamespace(flotillav1.SystemNamespace)); err != nil {
		return nil, fmt.Errorf("listing ClusterDetectors: %w", err)
	}
	byContext := map[string]flotillav1.ClusterDetector{}
	for _, d := range detectors.Items {
		byContext[d.Spec.Context] = d
	}
	contexts := make([]string, 0, len(reg.Contexts))
	for name := range reg.Contexts {
		contexts = append(contexts, name)
	}
	sort.Strings(contexts)
	rows := make([]clusterRow, 0, len(contexts))
	for _, c := range contexts {
		kctx := reg.Contexts[c]
		row := clusterRow{Context: c, Cluster: kctx.Cluster, User: kctx.AuthInfo, Name: clusters.ClusterName(c), Status: "Pending",
			Mode: modeColumn(byContext[c].Status)}
		if d, ok := byContext[c]; ok {
			row.Status, row.Reason, row.Role, row.Name = string(d.Status.ClusterStatus), d.Status.Reason, d.Labels[flotillav1.LabelRole], d.Name
			row.Version, row.Nodes, row.Message = d.Status.KubernetesVersion, d.Status.NodeCount, d.Status.Message
			if d.Status.VirtualNode != "" {
				// What real claims get there: its registration's class, else its default one.
				row.StorageClass = cmp.Or(d.Status.StorageClass, "default")
			}
		}
		if err := clusters.ValidateContext(reg, c); err != nil {
			row.Status, row.Reason, row.Refused = string(flotillav1.ClusterUnknown), flotillav1.ReasonInvalidContext, err.Error()
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// listClusters prints the registered clusters: a table (wide: with version, nodes and message),
// the refused contexts' reasons under it; or every column of every row as json or yaml.
func listClusters(ctx context.Context, primary client.Reader, out io.Writer, output string) error {
	rows, err := clusterRows(ctx, primary)
	if err != nil {
		return err
	}
	switch output {
	case "json", "yaml":
		doc := struct {
			Items []clusterRow `json:"items"`
		}{Items: rows}
		if err := printDocument(out, output, doc); err != nil {
			return fmt.Errorf("printing the clusters: %w", err)
		}
		return nil
	}
	wide := output == "wide"
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "CONTEXT\tCLUSTER\tUSER\tNAME\tROLE\tSTATUS\tREASON\tSTORAGECLASS\tMODE"
	if wide {
		header += "\tVERSION\tNODES\tMESSAGE"
	}
	fmt.Fprintln(w, header)
	for _, r := range rows {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Context, r.Cluster, r.User, r.Name, r.Role, r.Status, r.Reason, r.StorageClass, r.Mode)
		if wide {
			line += fmt.Sprintf("\t%s\t%d\t%s", r.Version, r.Nodes, r.Message)
		}
		fmt.Fprintln(w, line)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("printing the clusters: %w", err)
	}
	for _, r := range rows {
		if r.Refused == "" {
			continue
		}
		if _, werr := fmt.Fprintf(out, "\n%s\n", r.Refused); werr != nil {
			return fmt.Errorf("printing the clusters: %w", werr)
		}
	}
	return nil
}

// resolveTarget connects to the primary and finds a registered cluster by context or cluster name.
func resolveTarget(ctx context.Context, g *GlobalOptions, target string) (primary client.Client, contextName, name string, err error) {
	user, err := g.userConfig()
	if err != nil {
		return nil, "", "", err
	}
	primary, _, err = clientFor(user, g.primaryContext())
	if err != nil {
		return nil, "", "", err
	}
	reg, err := clusters.ReadRegistration(ctx, primary)
	if err != nil {
		return nil, "", "", err
	}
	contextName, name, err = findContext(reg, target)
	return primary, contextName, name, err
}

// findContext finds a registered context by context name or cluster name.
func findContext(reg *clientcmdapi.Config, nameOrContext string) (contextName, name string, err error) {
	if _, ok := reg.Contexts[nameOrContext]; ok {
		return nameOrContext, clusters.ClusterName(nameOrContext), nil
	}
	for c := range reg.Contexts {
		if clusters.ClusterName(c) == nameOrContext {
			return c, nameOrContext, nil
		}
	}
	return "", "", fmt.Errorf("no registered cluster or context named %q (see `flotillactl cluster list`)", nameOrContext)
}

// removeOptions are the flags of `cluster remove`.
type removeOptions struct {
	timeout       time.Duration
	orphan        bool
	force         bool
	deleteVolumes bool
	noDrain       bool
	context       string
	// dryRun prints what remove would do and changes nothing.
	dryRun bool
	// output is the format of a dry run's plan: "" (text), json or yaml (one document).
	output string
}

func newRemoveCommand(g *GlobalOptions) *cobra.Command {
	var o removeOptions
	var dry dryrun.Mode
	cmd := &cobra.Command{
		Use:   "remove CLUSTER|CONTEXT",
		Short: "Unregister a secondary: drain its node, remove its credentials, wait until Flotilla let go of it",
		Long: `remove first drains the secondary as ` + "`flotillactl cluster drain`" + ` does (cordon, then evictions
within PodDisruptionBudgets, at-most-once pods one at a time; pods no controller owns are refused
unless --force). --no-drain skips that and deletes the proxies on it at once, PodDisruptionBudgets
aside, as remove did before; --orphan leaves them and their delegates running. remove then waits
until their delegates are gone, removes its context from the registration Secret, and waits until the manager
has deleted the virtual node, the ClusterDetector and (with the registered credentials) the
FlotillaPrimary in the secondary, which lets the secondary's garbage collector remove everything
Flotilla created there. Last, with your own credentials for the secondary (the context of the
same name in your kubeconfig, or --secondary-context), it deletes what join made there for this primary
(ServiceAccount, roles, bindings, admission policy) and, unless --orphan, the namespaces Flotilla
created that hold nothing else; an object of those names without this primary's label, or a
namespace that also holds something else, is left and named.

--orphan is refused, before anything is changed, while at-most-once proxies (a StatefulSet's pods,
or pods annotated flotilla.dev/at-most-once) are bound to the virtual node: once the node is gone
their controllers re-create them elsewhere while the orphaned delegates keep running in the
secondary, so each would run twice. --force orphans them anyway, accepting that.

remove is refused, before anything is changed, while claims of class flotilla have their data in
the secondary: deleting the namespaces Flotilla created there would delete their real claims, and
the data with them. --orphan keeps the namespaces and the claims in the secondary;
--delete-volumes deletes them.

--dry-run prints what remove would do and changes nothing: the drain it would run first (as
` + "`cluster drain --dry-run`" + ` prints it; with --no-drain the proxies it would delete at once, with
--orphan those it would leave running), the FlotillaPrimary it would delete, the context it would
remove from the registration, and, read with your own credentials for the secondary as it is now,
what it would delete there and what it would leave (and why), then every refusal it would meet.
It exits with the error remove itself would give, after printing. With -o json or -o yaml the
plan is one document (kind RemovePlan). -o applies to --dry-run only.`,
		Example: "  # what remove would drain, delete and refuse; changes nothing\n" +
			"  flotillactl cluster remove secondary1 --dry-run\n" +
			"  flotillactl cluster remove secondary1 --dry-run -o json | jq '.secondary.namespaces'\n" +
			"  # drain (within PodDisruptionBudgets), then unregister and clean up\n" +
			"  flotillactl cluster remove secondary1 --timeout 10m\n" +
			"  # delete its pods at once, PodDisruptionBudgets aside\n" +
			"  flotillactl cluster remove secondary1 --no-drain\n" +
			"  # leave its workloads running there, unmanaged\n" +
			"  flotillactl cluster remove secondary1 --orphan",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dry == dryrun.Server {
				return dry.Refuse("remove", "plans from what it reads and would write nothing the API server could check")
			}
			if err := checkPlanOutput(o.output, dry); err != nil {
				return err
			}
			o.dryRun = dry.On()
			o.context = g.secondaryContextName(o.context, false, cmd.ErrOrStderr())
			return runRemove(cmd.Context(), g, args[0], o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to drain the virtual node (then to wait for the proxies left to go), and then for the manager to let go")
	cmd.Flags().BoolVar(&o.orphan, "orphan", false, "leave the proxies (and their delegates) running")
	cmd.Flags().BoolVar(&o.force, "force", false, "with --orphan, orphan at-most-once proxies too (each may then run twice: its delegate here, its re-creation elsewhere); "+
		"without, let the drain evict pods no controller owns (they are not re-created)")
	cmd.Flags().BoolVar(&o.noDrain, "no-drain", false, "do not drain: delete the proxies at once, PodDisruptionBudgets aside")
	cmd.Flags().BoolVar(&o.deleteVolumes, "delete-volumes", false, "delete the real claims of claims of class flotilla whose data is in the secondary, with the namespaces Flotilla created there (their data is lost)")
	cmd.Flags().StringVar(&o.context, "secondary-context", "", "your kubeconfig's context for the secondary, to remove what join made there (default: the registered context's name)")
	dryrun.AddFlag(cmd.Flags(), &dry, "print what remove would drain, delete and refuse; change nothing")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "with --dry-run: print the plan as one json or yaml document")
	return cmd
}

func runRemove(ctx context.Context, g *GlobalOptions, target string, o removeOptions, out io.Writer) error {
	primary, contextName, name, err := resolveTarget(ctx, g, target)
	if err != nil {
		return err
	}
	if o.dryRun {
		return dryRunRemove(ctx, primary, contextName, name, o, g.secondaryClientsAsUser, out)
	}
	return removeCluster(ctx, g, primary, contextName, name, o, out)
}

// removeCluster unregisters the secondary name (registered as contextName) from the primary.
func removeCluster(ctx context.Context, g *GlobalOptions, primary client.Client, contextName, name string, o removeOptions, out io.Writer) error {
	timeout, orphan := o.timeout, o.orphan
	// Which cluster this is, for the clean-up with the user's own credentials at the end.
	var cd flotillav1.ClusterDetector
	if err := primary.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}, &cd); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading ClusterDetector %s: %w", name, err)
	}
	primaryID, err := clusters.ClusterID(ctx, primary)
	if err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	nodeName := flotillav1.VirtualNodeName(name)
	if !orphan && !o.deleteVolumes {
		if err := checkVolumes(ctx, primary, name); err != nil {
			return err
		}
	}
	if orphan {
		if err := checkOrphan(ctx, primary, name, nodeName, o.force, out); err != nil {
			return err
		}
	}
	if err := clearNode(ctx, primary, name, o, out); err != nil {
		return err
	}
	if err := deleteOwner(ctx, primary, primaryID, contextName, name, orphan, out); err != nil {
		return err
	}
	if err := updateRegistration(ctx, primary, func(r *clusters.Registration) error {
		removeContext(r.Config, contextName)
		delete(r.Pinned, name) // a cluster registered under this name later is a new one
		delete(r.StorageClasses, name)
		r.Removed[name] = true // removed on purpose: the manager lets go of it (a vanished context is only detached)
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(out, "Removed context %s from the registration; waiting for the manager to let go of %s...\n", contextName, name)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		nodeErr := primary.Get(ctx, client.ObjectKey{Name: nodeName}, &corev1.Node{})
		cdErr := primary.Get(ctx, client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: name}, &flotillav1.ClusterDetector{})
		return apierrors.IsNotFound(nodeErr) && apierrors.IsNotFound(cdErr), nil
	})
	if err != nil {
		return fmt.Errorf("the virtual node %s or ClusterDetector %s is still there after %s: is the manager running? %w", nodeName, name, timeout, err)
	}
	fmt.Fprintf(out, "Cluster %s removed.\n", name)
	return cleanUpSecondary(ctx, g, o, contextName, name, primaryID, cd.Status.ClusterID, out)
}

// clearNode empties the virtual node of a cluster being removed: drained first, as `cluster
// drain` does (within PodDisruptionBudgets, at-most-once pods one at a time; its refusals, pods no
// controller owns without --force and data held there without --delete-volumes, come before it
// changes anything), unless --no-drain or --orphan; then what is left is deleted, unless --orphan.
func clearNode(ctx context.Context, primary client.Client, name string, o removeOptions, out io.Writer) error {
	nodeName, timeout, orphan := flotillav1.VirtualNodeName(name), o.timeout, o.orphan
	var n corev1.Node
	switch err := primary.Get(ctx, client.ObjectKey{Name: nodeName}, &n); {
	case err == nil && !orphan && !o.noDrain:
		d := newDrainer(primary, name, removeDrainOptions(o), out)
		if err := d.run(ctx); err != nil {
			return drainBeforeRemoving(name, err)
		}
	case err == nil:
		if err := setCordon(ctx, primary, name, true, out); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading %s: %w", nodeName, err)
	}
	if orphan {
		return nil
	}
	// What is left (all of it with --no-drain) is deleted.
	return deleteProxies(ctx, primary, nodeName, timeout, out)
}

// removeDrainOptions are the options of the drain remove runs first.
func removeDrainOptions(o removeOptions) drainOptions {
	return drainOptions{timeout: o.timeout, force: o.force, dropData: o.deleteVolumes}
}

// drainBeforeRemoving is the error of remove whose drain failed (or refused).
func drainBeforeRemoving(name string, err error) error {
	return fmt.Errorf("draining %s before removing it (--no-drain deletes its pods at once instead): %w", name, err)
}

// cleanUpSecondary removes, with the user's own credentials, what the join left in the secondary
// (the registered identity cannot remove its own rights), what made it a member of the ClusterSet
// (imports and their objects, ClusterProperties) and, unless orphaning, the namespaces Flotilla
// created there that hold nothing else.
func cleanUpSecondary(ctx context.Context, g *GlobalOptions, o removeOptions, contextName, name, primaryID, clusterID string, out io.Writer) error {
	userContext := o.context
	if userContext == "" {
		userContext = contextName
	}
	sc, err := g.secondaryClientsAsUser(ctx, userContext, clusterID)
	if err != nil {
		_, werr := fmt.Fprintf(out, "Not cleaned up in %s (%v): this primary's ServiceAccount, roles and admission policy there "+
			"(label %s=%s) and the namespaces it created; run `flotillactl cluster remove %s --secondary-context <yours>` again, "+
			"or delete them with kubectl.\n", name, err, flotillav1.LabelPrimary, primaryID, name)
		return werr
	}
	// The ClusterSet's objects and namespaces first, while this primary's admission policy is
	// whole (the orphaned delegates keep running in theirs).
	if err := removeSetMembership(ctx, sc.dynamic, name, primaryID, out); err != nil {
		return err
	}
	if !o.orphan {
		if err := removeNamespaces(ctx, sc, name, primaryID, out); err != nil {
			return err
		}
	}
	return removeAccess(ctx, sc.client, name, primaryID, out)
}

// OutOfServiceTaint releases the pods of a node known to be dead (Kubernetes' non-graceful node shutdown).
var OutOfServiceTaint = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

func newFenceCommand(g *GlobalOptions) *cobra.Command {
	var undo bool
	cmd := &cobra.Command{
		Use:   "fence CLUSTER|CONTEXT",
		Short: "Declare a secondary dead: taint its virtual node out-of-service so its pods are released",
		Long: `fence taints the secondary's virtual node node.kubernetes.io/out-of-service=nodeshutdown:NoExecute,
for a secondary known to be dead: its pods are evicted at once and at-most-once pods may run
elsewhere. --undo removes the taint.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFence(cmd.Context(), g, args[0], undo, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&undo, "undo", false, "remove the out-of-service taint")
	return cmd
}

func runFence(ctx context.Context, g *GlobalOptions, target string, undo bool, out io.Writer) error {
	primary, _, name, err := resolveTarget(ctx, g, target)
	if err != nil {
		return err
	}
	nodeName := flotillav1.VirtualNodeName(name)
	var n corev1.Node
	if err := primary.Get(ctx, client.ObjectKey{Name: nodeName}, &n); err != nil {
		return fmt.Errorf("reading %s: %w", nodeName, err)
	}
	base := n.DeepCopy()
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != OutOfServiceTaint.Key {
			taints = append(taints, t)
		}
	}
	if !undo {
		taints = append(taints, OutOfServiceTaint)
	}
	n.Spec.Taints = taints
	if err := primary.Patch(ctx, &n, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("tainting %s: %w", nodeName, err)
	}
	verb := "Fenced"
	if undo {
		verb = "Unfenced"
	}
	_, err = fmt.Fprintf(out, "%s %s (%s).\n", verb, nodeName, strings.TrimSpace(OutOfServiceTaint.ToString()))
	return err
}

var errUnknownKind = errors.New("unsupported kind")

// deleteOwner deletes this primary's FlotillaPrimary in the secondary, with the registered
// credentials: the secondary's garbage collector then removes everything of this primary there,
// or, with orphan, only their owner references, so delegates and copies keep running. Only an
// explicit remove does this; the manager never deletes a FlotillaPrimary.
func deleteOwner(ctx context.Context, primary client.Client, primaryID, contextName, name string, orphan bool, out io.Writer) error {
	reg, err := clusters.ReadRegistration(ctx, primary)
	if err != nil {
		return err
	}
	if _, ok := reg.Contexts[contextName]; !ok {
		return nil // not registered: nothing to reach it with
	}
	secondary, err := registeredClient(reg, contextName)
	var invalid *clusters.InvalidContextError
	if errors.As(err, &invalid) {
		// The manager never used it either; the operator must still be able to remove it.
		_, werr := fmt.Fprintf(out, "Not deleting FlotillaPrimary %s in %s with the registered credentials: %v. "+
			"What this primary made there stays until you delete FlotillaPrimary %s there with your own credentials.\n",
			primaryID, name, err, primaryID)
		return werr
	}
	if err != nil {
		return err
	}
	policy := metav1.DeletePropagationBackground
	if orphan {
		policy = metav1.DeletePropagationOrphan
	}
	fp := &flotillav1.FlotillaPrimary{ObjectMeta: metav1.ObjectMeta{Name: primaryID}}
	err = secondary.Delete(ctx, fp, client.PropagationPolicy(policy))
	switch {
	case err == nil:
		if orphan {
			fmt.Fprintf(out, "Deleted FlotillaPrimary %s in %s, orphaning what it owned (delegates keep running).\n", primaryID, name)
		} else {
			fmt.Fprintf(out, "Deleted FlotillaPrimary %s in %s; its garbage collector removes what remains of this primary there.\n", primaryID, name)
		}
		return nil
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	default:
		return fmt.Errorf("deleting FlotillaPrimary %s in %s (the cluster stays registered; retry when it answers): %w", primaryID, name, err)
	}
}

// copyDesired sets on live (as read from the cluster) what desired says, for the kinds join applies.
func copyDesired(live, desired client.Object) error {
	labels := live.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range desired.GetLabels() {
		labels[k] = v
	}
	live.SetLabels(labels)
	switch d := desired.(type) {
	case *corev1.Namespace, *corev1.ServiceAccount:
	case *corev1.ConfigMap:
		live.(*corev1.ConfigMap).Data = d.Data
	case *corev1.Secret:
		// Only a Secret of join's own (its type cannot change): the pulled secondary's agent's.
		live.(*corev1.Secret).Data = d.Data
		if live.(*corev1.Secret).Type == "" {
			live.(*corev1.Secret).Type = d.Type
		}
	case *rbacv1.ClusterRole:
		live.(*rbacv1.ClusterRole).Rules = d.Rules
	case *rbacv1.ClusterRoleBinding:
		live.(*rbacv1.ClusterRoleBinding).RoleRef, live.(*rbacv1.ClusterRoleBinding).Subjects = d.RoleRef, d.Subjects
	case *rbacv1.Role:
		live.(*rbacv1.Role).Rules = d.Rules
	case *rbacv1.RoleBinding:
		live.(*rbacv1.RoleBinding).RoleRef, live.(*rbacv1.RoleBinding).Subjects = d.RoleRef, d.Subjects
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		live.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec = d.Spec
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		live.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec = d.Spec
	case *flotillav1.FlotillaPrimary:
		live.(*flotillav1.FlotillaPrimary).Spec = d.Spec
	case *flotillav1.PrimaryAllowance:
		live.(*flotillav1.PrimaryAllowance).Spec = d.Spec // join --allow again: the cap it names
	case *apiextensionsv1.CustomResourceDefinition:
		live.(*apiextensionsv1.CustomResourceDefinition).Spec = d.Spec
	default:
		return fmt.Errorf("%w %T", errUnknownKind, desired)
	}
	return nil
}

// boundProxies lists the proxies bound to a virtual node.
func boundProxies(ctx context.Context, primary client.Reader, nodeName string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := primary.List(ctx, &pods, client.MatchingLabels{flotillav1.LabelProxy: "true"}); err != nil {
		return nil, fmt.Errorf("listing proxies: %w", err)
	}
	var on []corev1.Pod
	for _, p := range pods.Items {
		if p.Spec.NodeName == nodeName {
			on = append(on, p)
		}
	}
	return on, nil
}

// namedAtMost is how many pods a message names before it only counts the others.
const namedAtMost = 3

// namePods is "ns/a, ns/b, ... and N more", sorted.
func namePods(pods []corev1.Pod) string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	sort.Strings(names)
	if len(names) > namedAtMost {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:namedAtMost], ", "), len(names)-namedAtMost)
	}
	return strings.Join(names, ", ")
}

// checkOrphan refuses `remove --orphan` while at-most-once proxies (a StatefulSet's, or annotated
// flotilla.dev/at-most-once) that have not finished are bound to the cluster's virtual node: once
// the node is gone, the primary deletes its pods and their controllers re-create them elsewhere
// while the orphaned delegates keep running in the secondary, so each would run twice. With
// force it only warns. It runs before remove changes anything.
func checkOrphan(ctx context.Context, primary client.Reader, name, nodeName string, force bool, out io.Writer) error {
	proxies, err := boundProxies(ctx, primary, nodeName)
	if err != nil {
		return fmt.Errorf("checking the proxies on %s before orphaning them: %w", nodeName, err)
	}
	var once []corev1.Pod
	for _, p := range proxies {
		if translate.AtMostOnce(&p) && !translate.Terminal(&p) {
			once = append(once, p)
		}
	}
	if len(once) == 0 {
		return nil
	}
	if force {
		_, err := fmt.Fprintf(out, "Orphaning %d at-most-once proxies on %s (--force): %s. Their delegates keep running in %s "+
			"and their controllers re-create them elsewhere once the virtual node is gone, so each may run twice.\n",
			len(once), nodeName, namePods(once), name)
		return err
	}
	return fmt.Errorf("refusing to remove %s with --orphan: %d at-most-once proxies are bound to %s (%s); "+
		"once the virtual node is gone their controllers re-create them elsewhere while the orphaned delegates keep running in %s, "+
		"so each would run twice. Remove without --orphan (their delegates are stopped before they are re-created elsewhere), "+
		"or add --force to orphan them anyway, accepting that each may run twice",
		name, len(once), nodeName, namePods(once), name)
}

// deleteProxies deletes the proxies bound to a virtual node and waits until they are gone (the
// manager removes each one's delegate before it lets the proxy go).
func deleteProxies(ctx context.Context, primary client.Client, nodeName string, timeout time.Duration, out io.Writer) error {
	list := func() ([]corev1.Pod, error) { return boundProxies(ctx, primary, nodeName) }
	proxies, err := list()
	if err != nil {
		return err
	}
	for i := range proxies {
		if err := primary.Delete(ctx, &proxies[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting proxy %s/%s: %w", proxies[i].Namespace, proxies[i].Name, err)
		}
	}
	if len(proxies) > 0 {
		fmt.Fprintf(out, "Deleted %d proxies on %s; waiting for their delegates to go...\n", len(proxies), nodeName)
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		left, err := list()
		return err == nil && len(left) == 0, nil
	})
}

// checkVolumes refuses to remove a secondary that holds the data of claims of class flotilla:
// its namespaces, and their real claims, would be deleted.
func checkVolumes(ctx context.Context, primary client.Client, name string) error {
	var claims corev1.PersistentVolumeClaimList
	if err := primary.List(ctx, &claims); err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	var held []string
	for _, c := range claims.Items {
		if c.Annotations[flotillav1.AnnotationVolumeCluster] == name || keptIn(&c, name) {
			held = append(held, c.Namespace+"/"+c.Name)
		}
	}
	if len(held) == 0 {
		return nil
	}
	sort.Strings(held)
	return fmt.Errorf("cluster %s holds the data of %d claim(s) of class %s (%s): removing it would delete their real claims; "+
		"move or delete those claims first, or use --orphan to keep them there, or --delete-volumes to delete them",
		name, len(held), flotillav1.StorageClassRemote, strings.Join(held, ", "))
}

const storageClassFlagHelp = "the StorageClass the secondary gives the real claims of claims of class flotilla: a class name there, " +
	"\"none\" for a cluster that takes no such claims (pods using them do not fit there), or \"default\" for its default StorageClass " +
	"(the setting when none was ever given; without the flag, the setting stays as it was)"

// checkStorageClass refuses a --storage-class that cannot be a StorageClass's name.
func checkStorageClass(class string) error {
	if class == "" || class == clusters.StorageClassNone || class == "default" {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(class); len(errs) > 0 {
		return fmt.Errorf("--storage-class %q is not a StorageClass name: %s", class, strings.Join(errs, "; "))
	}
	return nil
}

// setStorageClass records --storage-class for a cluster in the registration ("" leaves it as it
// was; "default" removes it).
func setStorageClass(r *clusters.Registration, name, class string) {
	switch class {
	case "":
	case "default":
		delete(r.StorageClasses, name)
	default:
		if r.StorageClasses == nil {
			r.StorageClasses = map[string]string{}
		}
		r.StorageClasses[name] = class
	}
}
