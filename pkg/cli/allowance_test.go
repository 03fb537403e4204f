package cli

import (
	"strings"
	"testing"
)

func TestParseAllowance(t *testing.T) {
	got, err := parseAllowance(map[string]string{"pods": "50", "cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4", "requests.cpu": "500m"})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Pods(); p.Value() != 50 || got.Memory().String() != "64Gi" || len(got) != 5 {
		t.Errorf("parsed %v", got)
	}
	if got, err := parseAllowance(nil); got != nil || err != nil {
		t.Errorf("no --allow: %v, %v", got, err)
	}
	for pairs, want := range map[string]map[string]string{
		"not a quantity":    {"pods": "many"},
		"negative":          {"cpu": "-1"},
		"whole units":       {"nvidia.com/gpu": "0.5"},
		"not a resource a":  {"gpus": "1"},
		"not a resource a ": {"limits.nvidia.com/gpu": "1"},
	} {
		if _, err := parseAllowance(want); err == nil || !strings.Contains(err.Error(), strings.TrimSpace(pairs)) {
			t.Errorf("--allow %v: %v, want an error saying %q", want, err, pairs)
		}
	}
}
