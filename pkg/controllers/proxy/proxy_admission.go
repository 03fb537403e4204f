package proxy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/seal"
	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// notAdmitted says why a proxy bound to cluster must get no delegate ("" when it may): the
// reconciler checks again everything the webhook decides, before anything is written in the
// secondary, so that a pod that reached a virtual node without the webhook (its configuration
// deleted, a policy missing, a label that skips it) runs nothing. It checks that the webhook sealed
// the proxy as it is (seal.Verify: its constraints, labels, annotations and allowed clusters), that
// the spec can be offloaded (immutable fields, so checked as they are), that the bound cluster is
// one the sealed affinity and the user's cluster list allow, and that the delegate finalizer is
// there (without it the proxy could go while its delegate runs on), and that a proxy of a namespace
// with a FleetQuota was admitted by the quota controller, not only ungated. Pure.
func notAdmitted(proxy *corev1.Pod, cluster string, key seal.Key) string {
	if err := seal.Verify(key, proxy); err != nil {
		return err.Error()
	}
	if problems := translate.NotOffloadable(&proxy.Spec); len(problems) > 0 {
		return "it cannot be offloaded: " + strings.Join(problems, "; ")
	}
	if allowed := seal.AllowedClusters(proxy); !slices.Contains(allowed, cluster) {
		return fmt.Sprintf("it is bound to cluster %s, which its admission did not allow (allowed: %s)", cluster, strings.Join(allowed, ", "))
	}
	if list, ok := proxy.Annotations[flotillav1.AnnotationClusters]; ok && !namesCluster(list, cluster) {
		return fmt.Sprintf("it is bound to cluster %s, which annotation %s does not name", cluster, flotillav1.AnnotationClusters)
	}
	if !controllerutil.ContainsFinalizer(proxy, flotillav1.FinalizerDelegate) {
		return fmt.Sprintf("it lacks the finalizer %s", flotillav1.FinalizerDelegate)
	}
	if proxy.Annotations[flotillav1.AnnotationQuota] == flotillav1.QuotaWaiting {
		return fmt.Sprintf("its namespace's FleetQuota has not admitted it (annotation %s=%s): its scheduling gate %s was removed by someone other than Flotilla",
			flotillav1.AnnotationQuota, flotillav1.QuotaWaiting, flotillav1.SchedulingGateQuota)
	}
	return ""
}

func namesCluster(list, cluster string) bool {
	for _, n := range strings.Split(list, ",") {
		if strings.TrimSpace(n) == cluster {
			return true
		}
	}
	return false
}
