package virtualnode_test

import (
	"fmt"

	"github.com/flotilla-dev/flotilla/pkg/virtualnode"
)

// A virtual node never claims a kubelet newer than the primary's API server.
func ExampleCapVersion() {
	fmt.Println(virtualnode.CapVersion("v1.36.2", "v1.35.4"))
	fmt.Println(virtualnode.CapVersion("v1.34.1", "v1.35.4"))
	// Output:
	// v1.35.0
	// v1.34.1
}
