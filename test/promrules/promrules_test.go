package promrules

import (
	"maps"
	"slices"
	"testing"
)

func TestServedNamesEverySeriesOfAScrape(t *testing.T) {
	scrape := `# HELP flotilla_cluster_ready 1 when ...
# TYPE flotilla_cluster_ready gauge
flotilla_cluster_ready{cluster="east",role="secondary"} 1
# TYPE flotilla_elected_pod_start_seconds histogram
flotilla_elected_pod_start_seconds_bucket{cluster="east",le="0.1"} 0
flotilla_elected_pod_start_seconds_sum{cluster="east"} 1.5
flotilla_elected_pod_start_seconds_count{cluster="east"} 1
go_goroutines 42
`
	got := slices.Sorted(maps.Keys(Served(scrape)))
	want := []string{"flotilla_cluster_ready", "flotilla_elected_pod_start_seconds_bucket", "flotilla_elected_pod_start_seconds_count",
		"flotilla_elected_pod_start_seconds_sum", "go_goroutines"}
	if !slices.Equal(got, want) {
		t.Errorf("Served = %v, want %v", got, want)
	}
}
