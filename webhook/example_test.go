package webhook_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/webhook"
)

// Only annotated pods are elected; Admiralty's annotation counts when accepted.
func ExampleElected() {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"multicluster.admiralty.io/elect": ""}}}
	fmt.Println(webhook.Elected(pod, webhook.Options{}), webhook.Elected(pod, webhook.Options{AcceptAdmiralty: true}))
	// Output: false true
}
