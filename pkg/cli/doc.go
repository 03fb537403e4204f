// Package cli holds flotillactl's commands (cobra), also installable as the kubectl plugin
// kubectl-flotilla. Each command resolves its kubeconfig the way kubectl does and never prints a
// credential.
package cli
