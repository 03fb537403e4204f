package placement_test

import "github.com/flotilla-dev/flotilla/pkg/placement/placementtest"

// twoClusters are eu and us, as the webhook's tests see them too.
var twoClusters = placementtest.TwoClusters()
