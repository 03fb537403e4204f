package cli

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestModeColumn(t *testing.T) {
	rtt := &metav1.Duration{Duration: 1200 * time.Microsecond}
	for want, st := range map[string]flotillav1.ClusterDetectorStatus{
		"push":                    {},
		"pull":                    {Mode: flotillav1.ModePull},
		"pull, tunnel up (1.2ms)": {Mode: flotillav1.ModePull, Tunnel: &flotillav1.TunnelStatus{Connected: true, RoundTrip: rtt}},
		"pull, tunnel up":         {Mode: flotillav1.ModePull, Tunnel: &flotillav1.TunnelStatus{Connected: true}},
		"pull, no tunnel":         {Mode: flotillav1.ModePull, Tunnel: &flotillav1.TunnelStatus{LastError: "refused"}},
	} {
		if got := modeColumn(st); got != want {
			t.Errorf("modeColumn(%+v) = %q; want %q", st, got, want)
		}
	}
}
