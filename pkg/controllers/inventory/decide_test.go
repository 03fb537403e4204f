package inventory

import (
	"encoding/base64"
	"reflect"
	"testing"
)

// A secondary reached directly gets one access provider, the secretreader, with its server, its
// CA and the exec extension naming the Secret to read (the profile's name); one reached through
// its agent's tunnel (no server a reader can dial) gets none.
func TestAccessProviders(t *testing.T) {
	got := AccessProviders("flotilla-eu", "https://10.0.0.1:6443", []byte("ca"))
	want := []any{map[string]any{"name": "secretreader", "cluster": map[string]any{
		"server":                     "https://10.0.0.1:6443",
		"certificate-authority-data": base64.StdEncoding.EncodeToString([]byte("ca")),
		"extensions": []any{map[string]any{"name": "client.authentication.k8s.io/exec",
			"extension": map[string]any{"clusterName": "flotilla-eu"}}},
	}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AccessProviders = %#v\nwant %#v", got, want)
	}
	if got := AccessProviders("flotilla-edge", "", nil); got != nil {
		t.Errorf("no server: %#v", got)
	}
}
