package overrides

import (
	"testing"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestRewriteImage(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		ref  string
		o    flotillav1.ImageOverride
		want string
	}{
		{"nginx:1.27", flotillav1.ImageOverride{Registry: "mirror.eu.example.com"}, "mirror.eu.example.com/nginx:1.27"},
		{"docker.io/library/nginx", flotillav1.ImageOverride{Registry: "mirror:5000"}, "mirror:5000/library/nginx"},
		{"registry.k8s.io/pause:3.10", flotillav1.ImageOverride{Registry: "localhost"}, "localhost/pause:3.10"},
		{"localhost:5000/team/app:v1", flotillav1.ImageOverride{Tag: "v2"}, "localhost:5000/team/app:v2"},
		{"ghcr.io/team/app:v1@" + digest, flotillav1.ImageOverride{Tag: "v2"}, "ghcr.io/team/app:v2"},
		{"ghcr.io/team/app:v1", flotillav1.ImageOverride{Digest: digest}, "ghcr.io/team/app:v1@" + digest},
		{"ghcr.io/team/app", flotillav1.ImageOverride{Repository: "other/app"}, "ghcr.io/other/app"},
		{"team/app:v1", flotillav1.ImageOverride{}, "team/app:v1"},
		{"nginx", flotillav1.ImageOverride{Registry: "docker.io"}, "docker.io/library/nginx"},
	} {
		if got := rewriteImage(tc.ref, &tc.o); got != tc.want {
			t.Errorf("rewriteImage(%q, %+v) = %q, want %q", tc.ref, tc.o, got, tc.want)
		}
	}
}
