package installnames

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// chartSelector selects the chart's workloads (its selector labels, whatever the release).
var chartSelector = client.MatchingLabels{"app.kubernetes.io/name": "flotilla"}

// Find returns the names of the manager installed in namespace: from the prefix on its
// Deployment's flotilla.dev/name-prefix annotation, or the default names where no Deployment says
// otherwise (a manager out of cluster, a chart older than the annotation). Two Deployments naming
// different prefixes are an error: which one is meant cannot be guessed.
func Find(ctx context.Context, c client.Reader, namespace string) (flotillav1.InstallNames, error) {
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, client.InNamespace(namespace), chartSelector); err != nil {
		return flotillav1.InstallNames{}, fmt.Errorf("finding the manager's Deployment in %s: %w", namespace, err)
	}
	return fromDeployments(list.Items)
}

// fromDeployments picks the one prefix the Deployments name.
func fromDeployments(deployments []appsv1.Deployment) (flotillav1.InstallNames, error) {
	var prefixes []string
	for _, d := range deployments {
		if p := d.Annotations[flotillav1.AnnotationNamePrefix]; p != "" && !slices.Contains(prefixes, p) {
			prefixes = append(prefixes, p)
		}
	}
	switch len(prefixes) {
	case 0:
		return flotillav1.NamesFrom(flotillav1.DefaultNamePrefix), nil
	case 1:
		return flotillav1.NamesFrom(prefixes[0]), nil
	}
	slices.Sort(prefixes)
	return flotillav1.InstallNames{}, fmt.Errorf("the Deployments of Flotilla name several prefixes (%s): say which with --name-prefix",
		strings.Join(prefixes, ", "))
}
