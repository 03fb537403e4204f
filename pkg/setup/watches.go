package setup

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
	mcscontroller "github.com/flotilla-dev/flotilla/pkg/controllers/mcs"
	"github.com/flotilla-dev/flotilla/pkg/controllers/replicator"
	"github.com/flotilla-dev/flotilla/pkg/controllers/volume"
	"github.com/flotilla-dev/flotilla/pkg/delegates"
)

// SecondaryWatches is the one table of what the manager follows in secondaries: every registry
// watch a controller declares. Each kind must be in the registry's scheme (clusters.NewScheme) and
// granted get, list and watch by a secondary (pkg/access); the tests check both against this table.
func SecondaryWatches(scheme *runtime.Scheme) ([]clusters.Watch, error) {
	replicated, err := replicator.Watches(scheme)
	if err != nil {
		return nil, err
	}
	out := []clusters.Watch{delegates.Watch, volume.Watch}
	out = append(out, mcscontroller.Watches...)
	return append(out, replicated...), nil
}
