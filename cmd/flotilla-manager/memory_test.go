package main

import "testing"

func TestSoftMemoryLimitIsNinetyPercentOfTheContainers(t *testing.T) {
	tests := map[string]struct {
		limit   string
		want    int64
		wantErr bool
	}{
		"no limit":                      {limit: "", want: 0},
		"zero":                          {limit: "0", want: 0},
		"the downward API's bytes":      {limit: "536870912", want: 483183820},
		"a quantity":                    {limit: "512Mi", want: 483183820},
		"not a quantity: a clear error": {limit: "lots", wantErr: true},
	}
	for name, tc := range tests {
		got, err := softMemoryLimit(tc.limit)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: %d, %v; want %d, error %v", name, got, err, tc.want, tc.wantErr)
		}
	}
}
