package eventwriter

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// Forward shows a secondary's Event on the primary's object: its type and reason, its message
// after the cluster's name (translate.InCluster), its origin named (translate.EventOrigin), so
// that two Events of the secondary are never merged into one.
func Forward(rec events.EventRecorder, obj runtime.Object, cluster, action string, e *corev1.Event) {
	rec.Eventf(obj, translate.EventOrigin(e), e.Type, e.Reason, action, "%s", translate.InCluster(cluster, e.Message))
}
