package kubeletapi_test

import (
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/kubeletapi"
)

// Each port of the range serves the virtual node advertising it. A real node, a port outside the
// range and a second node on a taken port are served by no listener of the manager.
func ExampleServedPorts() {
	node := func(name string, port int32, labelled bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if labelled {
			n.Labels = map[string]string{flotillav1.LabelCluster: name}
		}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
		return n
	}
	nodes := []corev1.Node{
		node(flotillav1.VirtualNodeName("west"), 10251, true),
		node(flotillav1.VirtualNodeName("east"), 10250, true),
		node(flotillav1.VirtualNodeName("south"), 10250, true), // east has it: first by name
		node(flotillav1.VirtualNodeName("north"), 9000, true),  // outside the range
		node("worker-1", 10252, true),                          // a real node
	}
	served := kubeletapi.ServedPorts(nodes, kubeletapi.PortRange{First: 10250, Count: 4})
	for _, p := range []int32{10250, 10251, 10252, 9000} {
		if n, ok := served[p]; ok {
			fmt.Println(p, n.Name)
		} else {
			fmt.Println(p, "not served")
		}
	}
	// Output:
	// 10250 flotilla-east
	// 10251 flotilla-west
	// 10252 not served
	// 9000 not served
}

// The manager approves only the serving CSR it has just created itself; one someone else created
// for a virtual node is left alone, with the reason.
func ExampleApproveServingCSR() {
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", UID: "uid-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Username:   "mallory",
			SignerName: certificatesv1.KubeletServingSignerName,
		},
	}
	ok, why := kubeletapi.ApproveServingCSR(kubeletapi.ServingCSR{
		CSR: csr, UID: "uid-1", Self: "system:serviceaccount:flotilla-system:flotilla-manager",
		Node: flotillav1.VirtualNodeName("east"),
	})
	fmt.Println(ok, why)
	// Output:
	// false CSR csr-1 was created by "mallory", not by the manager ("system:serviceaccount:flotilla-system:flotilla-manager")
}
