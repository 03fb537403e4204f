package copies_test

import (
	"fmt"

	"github.com/flotilla-dev/flotilla/pkg/copies"
)

// A delegate whose required dependency is missing in the primary waits for it; the proxy's status
// says which.
func ExampleMissing() {
	fmt.Println(&copies.Missing{Kind: "ConfigMap", Name: "settings"})
	fmt.Println(&copies.Missing{Kind: "Secret", Name: "builder-token", Why: "a ServiceAccount token of the primary, which Flotilla never copies to a secondary"})
	// Output:
	// ConfigMap settings does not exist
	// Secret builder-token, a ServiceAccount token of the primary, which Flotilla never copies to a secondary
}
