package election_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/pkg/election"
)

// Only annotated pods are elected; Admiralty's annotation counts when accepted.
func ExampleElected() {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"multicluster.admiralty.io/elect": ""}}}
	fmt.Println(election.Elected(pod, election.Options{}), election.Elected(pod, election.Options{AcceptAdmiralty: true}))
	// Output: false true
}
