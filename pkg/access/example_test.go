package access_test

import (
	"fmt"

	"github.com/flotilla-dev/flotilla/pkg/access"
)

// Each primary gets its own identity in a secondary, named from its ID.
func ExampleNamesFor() {
	n := access.NamesFor("0f3e9d2c-6a4b-4c1e-9f7a-2b8d5e6f7a90")
	fmt.Println(n.Username())
	// Output: system:serviceaccount:flotilla-system:flotilla-0f3e9d2c
}
