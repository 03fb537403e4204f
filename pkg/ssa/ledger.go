package ssa

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ledger remembers what an applier last applied and the Version of the object the API server gave
// back, so that a resync writes only what changed: an object that still is what was applied (same
// desired content, Version untouched since) is not applied again. An idle cluster then gets
// no writes. An object that cannot be read (a Secret in a secondary) cannot show drift; it is applied
// again once blindFor has passed since its last apply.
type Ledger struct {
	mu      sync.Mutex
	entries map[string]ledgerEntry
}

type ledgerEntry struct {
	hash, version string
	at            time.Time
}

// Hash is the fingerprint of a desired object's content.
func Hash(obj any) (string, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("hashing the desired object: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// Unchanged says whether applying hash to key can be skipped: it was the last one applied and the
// live object still has the Version that apply returned (liveVersion; "" when it is gone), or,
// for an object that cannot be read, the last apply is younger than blindFor.
func (l *Ledger) Unchanged(key, hash, liveVersion string, readable bool, now time.Time, blindFor time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[key]
	switch {
	case !ok || e.hash != hash:
		return false
	case readable:
		return liveVersion != "" && liveVersion == e.version
	default:
		return now.Sub(e.at) < blindFor
	}
}

// Known says whether the ledger has an entry for key: one this process applied, or found already
// as desired (Record after WouldChange).
func (l *Ledger) Known(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.entries[key]
	return ok
}

// Record notes a successful apply of hash to key, which the API server answered with an object of
// that Version.
func (l *Ledger) Record(key, hash, version string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entries == nil {
		l.entries = map[string]ledgerEntry{}
	}
	l.entries[key] = ledgerEntry{hash: hash, version: version, at: now}
}

// Version is what of a live object moves when someone changes what an apply wrote. For an object
// the API server keeps a generation for (a Deployment, an Ingress): its UID, generation, labels
// and annotations, since its status moves its resourceVersion on its own (a Deployment's
// controller counting replicas) and is no drift; else its resourceVersion. "" for no object.
func Version(o metav1.Object) string {
	if o.GetGeneration() == 0 {
		return o.GetResourceVersion()
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n", o.GetUID(), o.GetGeneration())
	for _, m := range []map[string]string{o.GetLabels(), o.GetAnnotations()} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%q=%q\n", k, m[k])
		}
		h.Write([]byte{0})
	}
	return "g:" + hex.EncodeToString(h.Sum(nil))
}

// Forget drops key, after its object was deleted or given up.
func (l *Ledger) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.entries, key)
}

// ForgetPrefix drops every key that starts with prefix (all of one applier's objects in a cluster
// whose namespace was made again, say).
func (l *Ledger) ForgetPrefix(prefix string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.entries {
		if strings.HasPrefix(k, prefix) {
			delete(l.entries, k)
		}
	}
}
