package dependency

import "github.com/flotilla-dev/flotilla/pkg/copies"

// Reflector is copies.Reflector, under the name the manager's wiring (cmd/flotilla-manager) gives
// it: the proxy reconciler takes a *copies.Reflector, which this is.
type Reflector = copies.Reflector
