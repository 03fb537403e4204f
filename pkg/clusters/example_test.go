package clusters_test

import (
	"fmt"

	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// Context names become cluster names: kept when valid, else sanitised with a short hash.
func ExampleClusterName() {
	fmt.Println(clusters.ClusterName("secondary1"))
	fmt.Println(clusters.ValidClusterName(clusters.ClusterName("arn:aws:eks:us-east-1:123456789012:cluster/prod")))
	// Output:
	// secondary1
	// true
}
