package setup

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultOptionsAreValid(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("DefaultOptions: %v", err)
	}
}

func TestValidateNamesTheFlagOfEachRefusedSetting(t *testing.T) {
	tests := map[string]struct {
		change func(*Options)
		want   string
	}{
		"an unknown pod network":         {func(o *Options) { o.Election.PodNetwork = "routed" }, `--pod-network "routed"`},
		"an unknown placement":           {func(o *Options) { o.Election.ProxyPlacement = "random" }, `--proxy-placement must be webhook or scheduler, not "random"`},
		"no sweep interval":              {func(o *Options) { o.Election.SweepInterval = 0 }, "--sweep-interval 0s"},
		"no namespace cleanup interval":  {func(o *Options) { o.Election.NamespaceCleanupInterval = 0 }, "--namespace-cleanup-interval 0s"},
		"no rebalance interval":          {func(o *Options) { o.Election.RebalanceInterval = 0 }, "--rebalance-interval 0s"},
		"a negative replication timeout": {func(o *Options) { o.Replicator.Timeout = -time.Second }, "--replication-timeout -1s"},
		"a negative quiet start":         {func(o *Options) { o.Election.QuietStart = -time.Second }, "--quiet-start -1s: want 0 (none) or more"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := DefaultOptions()
			tc.change(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestProxyWorkersPerClusterIsHalfTheWorkersUnlessSet(t *testing.T) {
	tests := []struct {
		name               string
		workers, per, want int
	}{
		{"the default: half", 96, 0, 48},
		{"set", 96, 10, 10},
		{"one worker: one", 1, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ElectionOptions{ProxyWorkers: tc.workers, ProxyWorkersPerCluster: tc.per}
			if got := o.proxyWorkersPerCluster(); got != tc.want {
				t.Errorf("proxyWorkersPerCluster: %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNodeAddressIsLoopbackWhenUnset(t *testing.T) {
	if got := (VirtualNodeOptions{}).nodeAddress(); got != "127.0.0.1" {
		t.Errorf("nodeAddress: %q, want 127.0.0.1", got)
	}
	if got := (VirtualNodeOptions{Address: "10.0.0.7"}).nodeAddress(); got != "10.0.0.7" {
		t.Errorf("nodeAddress: %q, want 10.0.0.7", got)
	}
}

func TestCacheOptionsRestrictWhatTheReconcilersReadFromTheCache(t *testing.T) {
	o, err := cacheOptions()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for obj, by := range o.ByObject {
		kind := reflect.TypeOf(obj).Elem().Name()
		kinds[kind] = true
		if by.Label == nil && by.Namespaces == nil {
			t.Errorf("%s: cached without a selector or namespaces", kind)
		}
	}
	for _, kind := range []string{"Secret", "ClusterDetector", "Pod", "Node", "Deployment", "ConfigMap", "EndpointSlice"} {
		if !kinds[kind] {
			t.Errorf("%s: not restricted (restricted: %v)", kind, kinds)
		}
	}
}
