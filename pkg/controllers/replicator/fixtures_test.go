package replicator

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// sample is a Replicator with every field of plumber's, TLS on.
func sample() *flotillav1.Replicator {
	three := int32(3)
	return &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u1"}, Spec: flotillav1.ReplicatorSpec{
		ReplicationNamespace: "shop", DeploymentName: "nginx",
		DeploymentSpec: &flotillav1.ReplicatedDeploymentSpec{Replicas: &three, Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}}}},
		ConfigMapName: "nginx", ConfigMapData: map[string]string{"a": "b"},
		ServiceName: "nginx", ServiceSpec: &corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		IngressName: "nginx", IngressSpec: &networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "b.example"}, {Host: "a.example"}, {Host: "b.example"}}},
		IngressSecureEnabled: true,
	}}
}
