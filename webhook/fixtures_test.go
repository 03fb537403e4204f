package webhook

import "github.com/flotilla-dev/flotilla/pkg/placement/placementtest"

// The pods and cluster views the webhook's tests start from: placement's own.
type podOpt = placementtest.PodOpt

var (
	elected   = placementtest.Elected
	annotate  = placementtest.Annotate
	clusterOf = placementtest.ClusterOf
)
