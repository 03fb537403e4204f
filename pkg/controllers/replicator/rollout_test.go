package replicator

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestWaves(t *testing.T) {
	// ctx-s2 is a context name of s2; "gone" names no cluster.
	resolve := func(name string) []string {
		switch name {
		case "ctx-s2":
			return []string{"s2"}
		case "gone":
			return nil
		}
		return []string{name}
	}
	waves := func(ws ...[]string) *flotillav1.Rollout {
		r := &flotillav1.Rollout{}
		for _, w := range ws {
			r.Waves = append(r.Waves, flotillav1.RolloutWave{Clusters: w})
		}
		return r
	}
	targets := []string{"s1", "s2", "s3"}
	for _, tc := range []struct {
		name    string
		rollout *flotillav1.Rollout
		want    [][]string
	}{
		{"no rollout: one wave, the primary first", nil, [][]string{{PrimaryName, "s1", "s2", "s3"}}},
		{"canary first; the primary and the rest last", waves([]string{"s1"}, []string{"ctx-s2"}), [][]string{{"s1"}, {"s2"}, {PrimaryName, "s3"}}},
		{"the primary named", waves([]string{"primary"}, []string{"s1", "s2", "s3"}), [][]string{{PrimaryName}, {"s1", "s2", "s3"}, nil}},
		{"a name of no target adds nothing, its wave keeps its number", waves([]string{"gone"}, []string{"s1"}), [][]string{{}, {"s1"}, {PrimaryName, "s2", "s3"}}},
		{"not a target: left out", waves([]string{"s9", "s1"}), [][]string{{"s1"}, {PrimaryName, "s2", "s3"}}},
		{"two names of one cluster: its first wave", waves([]string{"s2"}, []string{"ctx-s2", "s1"}), [][]string{{"s2"}, {"s1"}, {PrimaryName, "s3"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Waves(tc.rollout, targets, resolve); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGateOf(t *testing.T) {
	bad := flotillav1.ObjectHealth{Kind: "Deployment", Name: "web", Reason: HealthImagePullFailed, Failing: true, Message: "ErrImagePull"}
	slow := flotillav1.ObjectHealth{Kind: "Deployment", Name: "web", Reason: HealthProgressing, Message: "1 of 2"}
	res := func(syncs ...flotillav1.ClusterSync) []placeResult {
		var out []placeResult
		for _, s := range syncs {
			out = append(out, placeResult{sync: s})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		results []placeResult
		want    waveGate
	}{
		{"healthy: no gate", res(flotillav1.ClusterSync{Name: "s1", Synced: true, Healthy: true}), waveGate{}},
		{"an empty wave: no gate", nil, waveGate{}},
		{"failing", res(flotillav1.ClusterSync{Name: "s0", Synced: true, Healthy: true}, flotillav1.ClusterSync{Name: "s1", Synced: true, Health: []flotillav1.ObjectHealth{bad}}),
			waveGate{Wave: 2, Clusters: []string{"s0", "s1"}, Why: "s1: Deployment web: ImagePullFailed: ErrImagePull", Failing: true}},
		{"not yet healthy", res(flotillav1.ClusterSync{Name: "s1", Synced: true, Health: []flotillav1.ObjectHealth{slow}}),
			waveGate{Wave: 2, Clusters: []string{"s1"}, Why: "s1: Deployment web: Progressing: 1 of 2"}},
		{"not synced", res(flotillav1.ClusterSync{Name: "s1", Message: "timeout"}), waveGate{Wave: 2, Clusters: []string{"s1"}, Why: "s1: not synced: timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gateOf(2, tc.results); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestProgressingCondition(t *testing.T) {
	gate := waveGate{Wave: 1, Clusters: []string{"s1"}, Why: "s1: Deployment web: ImagePullFailed: ErrImagePull"}
	failing := gate
	failing.Failing = true
	for _, tc := range []struct {
		name       string
		gate       waveGate
		held       []string
		status     metav1.ConditionStatus
		reason     string
		messageHas string
	}{
		{"every wave has it", waveGate{}, nil, metav1.ConditionTrue, flotillav1.ReasonRolledOut, "generation 4"},
		{"waiting on a wave not healthy yet", gate, []string{"s2", PrimaryName}, metav1.ConditionTrue, flotillav1.ReasonWaitingForWave,
			"the 1st wave (s1) is not healthy with generation 4: s1: Deployment web: ImagePullFailed: ErrImagePull; s2, primary keep their generation"},
		{"blocked on a failing wave", failing, []string{"s2"}, metav1.ConditionFalse, flotillav1.ReasonRolloutBlocked, "Blocked: the 1st wave (s1)"},
		{"a failing wave nobody waits for (the last)", failing, nil, metav1.ConditionTrue, flotillav1.ReasonRolledOut, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ProgressingCondition(4, tc.gate, tc.held)
			if c.Type != flotillav1.ConditionProgressing || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 4 ||
				!strings.Contains(c.Message, tc.messageHas) {
				t.Errorf("got %+v; want %s %s with %q", c, tc.status, tc.reason, tc.messageHas)
			}
		})
	}
}

func TestOrdinal(t *testing.T) {
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 10: "10th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 22: "22nd", 111: "111th"} {
		if got := Ordinal(n); got != want {
			t.Errorf("Ordinal(%d) = %s, want %s", n, got, want)
		}
	}
}
