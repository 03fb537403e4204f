package virtualnode

import (
	"encoding/json"
	"testing"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestLabelPatchRemovesADerivedLabelNoLongerAgreedOnAndKeepsOthers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur, want map[string]string
		patch     string
	}{
		{"nothing to do", map[string]string{flotillav1.LabelRegion: "eu"}, map[string]string{flotillav1.LabelRegion: "eu"}, `{}`},
		{"a new region", map[string]string{flotillav1.LabelRegion: "eu"}, map[string]string{flotillav1.LabelRegion: "us"}, `{"` + flotillav1.LabelRegion + `":"us"}`},
		{"the nodes disagree: the region goes", map[string]string{flotillav1.LabelRegion: "eu", flotillav1.LabelZone: "eu-1"}, map[string]string{},
			`{"` + flotillav1.LabelRegion + `":null,"` + flotillav1.LabelZone + `":null}`},
		{"a user's label stays", map[string]string{"team": "fleet"}, map[string]string{}, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(labelPatch(tc.cur, tc.want))
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != tc.patch {
				t.Errorf("patch %s, want %s", raw, tc.patch)
			}
		})
	}
}

func TestAnnotationPatchRemovesTheRetiredResourceMetricsPath(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur, want map[string]string
		patch     string
	}{
		{"an earlier version's path goes", map[string]string{AnnotationResourceMetricsPath: "/metrics/nodes/flotilla-eu/metrics/resource"}, nil,
			`{"` + AnnotationResourceMetricsPath + `":null}`},
		{"a user's annotation stays", map[string]string{"team": "fleet"}, nil, `{}`},
		{"a wanted one is set", nil, map[string]string{"a": "b"}, `{"a":"b"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(annotationPatch(tc.cur, tc.want))
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != tc.patch {
				t.Errorf("patch %s, want %s", raw, tc.patch)
			}
		})
	}
}
