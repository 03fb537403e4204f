// Package clientca owns the CA that signs the primary API server's client certificates as the
// cluster publishes it (kube-system/extension-apiserver-authentication, its client-ca-file): read,
// kept fresh, and handed to the TLS servers that verify who calls them (the virtual nodes' kubelet
// API, the admission webhook).
package clientca

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ReloadEvery is how often the client CA is read again (the API server's may rotate).
const ReloadEvery = time.Minute

// ReadFunc reads the current client CA.
type ReadFunc func(context.Context) (*x509.CertPool, error)

// FromCluster reads the client CA the API server publishes.
func FromCluster(c kubernetes.Interface) ReadFunc {
	return func(ctx context.Context) (*x509.CertPool, error) {
		cm, err := c.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the client CA (kube-system/extension-apiserver-authentication): %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(cm.Data["client-ca-file"])) {
			return nil, errors.New("kube-system/extension-apiserver-authentication has no client-ca-file")
		}
		return pool, nil
	}
}

// Pool holds the current client CA pool.
type Pool struct {
	mu   sync.RWMutex
	pool *x509.CertPool
}

// Get is the current pool (nil before the first Reload).
func (p *Pool) Get() *x509.CertPool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.pool
}

// Reload reads the pool now.
func (p *Pool) Reload(ctx context.Context, read ReadFunc) error {
	pool, err := read(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.pool = pool
	p.mu.Unlock()
	return nil
}

// KeepReloaded reads the pool every interval until ctx ends; a failed read keeps the last.
func (p *Pool) KeepReloaded(ctx context.Context, read ReadFunc, every time.Duration, log logr.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := p.Reload(ctx, read); err != nil {
				log.Error(err, "Reloading the client CA failed; the last one stays in use")
			}
		}
	}
}
