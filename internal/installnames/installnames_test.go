package installnames

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestFromDeployments(t *testing.T) {
	deployment := func(prefix string) appsv1.Deployment {
		d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
		if prefix != "" {
			d.Annotations = map[string]string{flotillav1.AnnotationNamePrefix: prefix}
		}
		return d
	}
	for _, tc := range []struct {
		name        string
		deployments []appsv1.Deployment
		want        string // the webhook configuration's name; "" with wantErr
		wantErr     bool
	}{
		{name: "no Deployment: a manager out of cluster", want: "flotilla"},
		{name: "a Deployment without the annotation: the default names", deployments: []appsv1.Deployment{deployment("")}, want: "flotilla"},
		{name: "the chart's fullnameOverride", deployments: []appsv1.Deployment{deployment("fleet")}, want: "fleet"},
		{name: "the manager and the lender agree", deployments: []appsv1.Deployment{deployment("fleet"), deployment("fleet")}, want: "fleet"},
		{name: "two prefixes: not guessed", deployments: []appsv1.Deployment{deployment("fleet"), deployment("other")}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, err := fromDeployments(tc.deployments)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if names.WebhookConfiguration != tc.want {
				t.Fatalf("webhook configuration %q, want %q", names.WebhookConfiguration, tc.want)
			}
			if !tc.wantErr && names.ManagerLease != tc.want+"-manager.flotilla.dev" {
				t.Fatalf("Lease %q, from another prefix than %q", names.ManagerLease, tc.want)
			}
		})
	}
}
