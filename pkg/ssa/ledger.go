package ssa

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Ledger remembers what an applier last applied and the resourceVersion the API server gave it
// back, so that a resync writes only what changed: an object that still is what was applied (same
// desired content, resourceVersion untouched since) is not applied again. An idle cluster then gets
// no writes. An object that cannot be read (a Secret in a secondary) cannot show drift; it is applied
// again once blindFor has passed since its last apply.
type Ledger struct {
	mu      sync.Mutex
	entries map[string]ledgerEntry
}

type ledgerEntry struct {
	hash, resourceVersion string
	at                    time.Time
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
// live object still has the resourceVersion that apply returned (liveRV; "" when it is gone), or,
// for an object that cannot be read, the last apply is younger than blindFor.
func (l *Ledger) Unchanged(key, hash, liveRV string, readable bool, now time.Time, blindFor time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[key]
	switch {
	case !ok || e.hash != hash:
		return false
	case readable:
		return liveRV != "" && liveRV == e.resourceVersion
	default:
		return now.Sub(e.at) < blindFor
	}
}

// Record notes a successful apply of hash to key, which the API server answered with resourceVersion.
func (l *Ledger) Record(key, hash, resourceVersion string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entries == nil {
		l.entries = map[string]ledgerEntry{}
	}
	l.entries[key] = ledgerEntry{hash: hash, resourceVersion: resourceVersion, at: now}
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
