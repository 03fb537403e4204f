// Command kube-controller-manager is the upstream controller manager, built for the test bed's clusters on Kubernetes v1.34.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() { os.Exit(cli.Run(app.NewControllerManagerCommand())) }
