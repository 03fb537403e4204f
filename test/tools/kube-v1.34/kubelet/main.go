// Command kubelet is the upstream kubelet, built for the test bed's clusters on Kubernetes v1.34's one real node.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as upstream's main registers it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream's main registers them
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric, as upstream's main registers it
	"k8s.io/kubernetes/cmd/kubelet/app"
)

// A main may create the root context; the kubelet stops when its command returns.
func main() { os.Exit(cli.Run(app.NewKubeletCommand(context.Background()))) }
