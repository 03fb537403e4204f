package translate_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-dev/flotilla/pkg/translate"
)

// What a delegate needs copied to its secondary.
func ExampleDependencies() {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}},
	}}}}
	cms, secrets := translate.Dependencies(pod)
	fmt.Println(len(cms), secrets[0].Name)
	// Output: 0 db
}
