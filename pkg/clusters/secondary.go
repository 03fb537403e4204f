package clusters

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Secondary is what other components may use of one secondary: its clients and the caches of
// the Watches declared by controllers.
type Secondary struct {
	Name      string
	Client    client.Client
	Clientset kubernetes.Interface
	// Config reaches the secondary (for streams: exec, attach).
	Config *rest.Config
	// OwnerUID is the UID of this primary's FlotillaPrimary there ("" until it is known).
	OwnerUID string
	// Running says the secondary answers its probes: a secondary that does not gets no calls but
	// bounded ones (its Client's calls time out, CallTimeout).
	Running bool
	remote  *remoteWatch
}

// Cached is the secondary's cache of w and what w's Track keeps beside it. synced is false while
// that cache is not started (on a standby replica, before a source declared w) or not complete:
// then nothing may be concluded from what is missing in it.
func (s Secondary) Cached(w Watch) (store cache.Indexer, tracked any, synced bool) {
	if s.remote == nil {
		return nil, nil, false
	}
	x, ok := s.remote.get(w.Name)
	if !ok || !x.informer.HasSynced() {
		return nil, nil, false
	}
	return x.informer.GetIndexer(), x.tracked, true
}

// Secondary returns the usable secondary of that name.
func (r *Registry) Secondary(name string) (Secondary, bool) {
	r.mu.Lock()
	c, ok := r.clusters[name]
	r.mu.Unlock()
	if !ok || c.client == nil {
		return Secondary{}, false
	}
	// A secondary whose identity changed keeps its virtual node, but its clients reach another
	// cluster than the one its delegates run in: nothing may use them until it is joined again.
	if snap := c.snapshot(); !snap.UsableSecondary() || snap.Reason == flotillav1.ReasonIdentityChanged {
		return Secondary{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Secondary{Name: name, Client: c.ctrl, Clientset: c.client, Config: c.config, OwnerUID: c.ownerUID,
		Running: c.state.Status == flotillav1.ClusterRunning, remote: c.remote}, true
}

// EventsOf lists the secondary's Events about one of its objects, by its UID (one list, on the
// involvedObject.uid field the API server indexes), for a controller to show them in the primary.
func (s Secondary) EventsOf(ctx context.Context, namespace string, uid types.UID) ([]corev1.Event, error) {
	var evs corev1.EventList
	if err := s.Client.List(ctx, &evs, client.InNamespace(namespace), client.MatchingFields{"involvedObject.uid": string(uid)}); err != nil {
		return nil, fmt.Errorf("listing the Events of %s in %s: %w", uid, s.Name, err)
	}
	return evs.Items, nil
}

// Access is how a reader outside Flotilla reaches a secondary as Flotilla's joined identity does:
// its API server's address and CA, and that identity's current token. It is a credential: never
// logged, traced or printed.
type Access struct {
	Server string
	CAData []byte
	Token  string
}

// AccessOf is how a reader outside Flotilla reaches a usable secondary (KEP-5339's access
// providers of the inventory). false for a cluster that is not usable, reached through its agent's
// tunnel (nothing outside the manager can dial it), or whose credential is not a token.
func (r *Registry) AccessOf(name string) (Access, bool) {
	sec, ok := r.Secondary(name)
	if !ok || sec.Config == nil || r.mode(name) != "" {
		return Access{}, false
	}
	r.mu.Lock()
	c := r.clusters[name]
	r.mu.Unlock()
	tok := c.currentToken()
	if tok == "" {
		return Access{}, false
	}
	ca := append([]byte(nil), sec.Config.CAData...)
	if len(ca) == 0 && sec.Config.CAFile != "" {
		raw, err := os.ReadFile(sec.Config.CAFile)
		if err != nil {
			return Access{}, false
		}
		ca = raw
	}
	return Access{Server: sec.Config.Host, CAData: ca, Token: tok}, true
}
