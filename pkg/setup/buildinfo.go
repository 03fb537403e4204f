package setup

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/flotilla-dev/flotilla/pkg/version"
)

// buildInfo is the build each replica runs, as `flotilla_build_info 1` labelled with it: an
// upgrade half rolled out shows as two versions, and alerts and dashboards can join on it.
var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "flotilla_build_info",
	Help: "1, labelled with the build the replica runs: version, commit, goversion.",
}, []string{"version", "commit", "goversion"})

func init() {
	metrics.Registry.MustRegister(buildInfo)
	i := version.Get()
	buildInfo.WithLabelValues(i.Version, i.Commit, i.GoVersion).Set(1)
}
