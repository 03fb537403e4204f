package cli

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseKinds(t *testing.T) {
	cases := []struct {
		name    string
		kinds   []string
		crds    bool
		want    []schema.GroupResource
		wantErr string
	}{
		{name: "none", want: nil},
		{name: "custom and core kinds, each once, sorted", kinds: []string{"widgets.example.com", "limitranges", " widgets.example.com"},
			want: []schema.GroupResource{{Resource: "limitranges"}, {Group: "example.com", Resource: "widgets"}}},
		{name: "crds with a custom kind", kinds: []string{"widgets.example.com"}, crds: true,
			want: []schema.GroupResource{{Group: "example.com", Resource: "widgets"}}},
		{name: "crds without a custom kind", kinds: []string{"limitranges"}, crds: true, wantErr: "--crds goes with --kinds"},
		{name: "a kind name, not a resource", kinds: []string{"Widget.example.com"}, wantErr: "is not a resource name"},
		{name: "Flotilla's own", kinds: []string{"replicators.flotilla.dev"}, wantErr: "Flotilla's own kinds"},
		{name: "definitions themselves", kinds: []string{"customresourcedefinitions.apiextensions.k8s.io"}, wantErr: "allowed by --crds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseKinds(tc.kinds, tc.crds)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
