package virtualnode

import (
	"maps"
	"testing"
)

func TestAllocatePorts(t *testing.T) {
	r := PortRange{First: 10250, Count: 3}
	tests := map[string]struct {
		held map[string]int32
		want []string
		out  map[string]int32
	}{
		"new nodes take the lowest ports in the order of their names": {
			want: []string{"flotilla-us", "flotilla-eu"},
			out:  map[string]int32{"flotilla-eu": 10250, "flotilla-us": 10251},
		},
		"a node keeps the port it advertises": {
			held: map[string]int32{"flotilla-us": 10252},
			want: []string{"flotilla-us", "flotilla-eu"},
			out:  map[string]int32{"flotilla-eu": 10250, "flotilla-us": 10252},
		},
		"a node not wanted (its secondary away) keeps its port held": {
			held: map[string]int32{"flotilla-away": 10250},
			want: []string{"flotilla-eu"},
			out:  map[string]int32{"flotilla-eu": 10251},
		},
		"a port out of the range is replaced": {
			held: map[string]int32{"flotilla-eu": 9000},
			want: []string{"flotilla-eu"},
			out:  map[string]int32{"flotilla-eu": 10250},
		},
		"a port advertised twice (the one shared port of old) stays with the first by name": {
			held: map[string]int32{"flotilla-eu": 10250, "flotilla-us": 10250, "flotilla-ap": 10250},
			want: []string{"flotilla-eu", "flotilla-us", "flotilla-ap"},
			out:  map[string]int32{"flotilla-ap": 10250, "flotilla-eu": 10251, "flotilla-us": 10252},
		},
		"no port left: 0": {
			held: map[string]int32{"a": 10250, "b": 10251, "c": 10252},
			want: []string{"flotilla-eu"},
			out:  map[string]int32{"flotilla-eu": 0},
		},
		"no range: 0 for all": {
			want: []string{"flotilla-eu"},
			out:  map[string]int32{"flotilla-eu": 0},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rng := r
			if name == "no range: 0 for all" {
				rng = PortRange{}
			}
			if got := AllocatePorts(tc.held, tc.want, rng); !maps.Equal(got, tc.out) {
				t.Errorf("got %v, want %v", got, tc.out)
			}
		})
	}
}

func TestAllocationIsStable(t *testing.T) {
	r := PortRange{First: 20000, Count: 100}
	first := AllocatePorts(nil, []string{"flotilla-c", "flotilla-a", "flotilla-b"}, r)
	// What another replica, or this one after a restart, computes from the advertised ports.
	again := AllocatePorts(first, []string{"flotilla-b", "flotilla-c", "flotilla-a", "flotilla-d"}, r)
	for name, p := range first {
		if again[name] != p {
			t.Errorf("%s moved from %d to %d", name, p, again[name])
		}
	}
	if again["flotilla-d"] != 20003 {
		t.Errorf("the new node got %d, want 20003", again["flotilla-d"])
	}
}
