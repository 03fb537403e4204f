// Package setup owns the wiring of the manager: from one Options struct it builds the
// controller-runtime manager with the cache options the reconcilers rely on (label selectors,
// transforms, the namespaces Secrets are read in), the cluster registry, every controller, the
// admission webhook's certificates and handlers, the virtual nodes and their kubelet API, and the
// health and readiness checks. cmd/flotilla-manager fills Options from its flags and calls New;
// the integration suites call New too, with faster intervals, so they run what the manager runs.
//
// # Usage
//
//	opts := setup.DefaultOptions()
//	opts.Clusters.ProbeInterval = 500 * time.Millisecond
//	mgr, err := setup.New(ctx, cfg, opts, ctrl.Log)
//	if err != nil {
//		return err
//	}
//	return mgr.Start(ctx)
//
// # Implementation considerations
//
//   - DefaultOptions is the one place of every default; where a package has a default of its own
//     (pkg/clusters, pkg/virtualnode, the Replicator controller), DefaultOptions takes its constant.
//   - New reads the primary (its ID, version and known clusters) and writes the webhook's
//     certificate, its configuration and the admission seal's key before it returns: the webhook
//     server needs the certificate files when it starts.
//   - Every reconciler's SetupWithManager takes controller.Options; the concurrency and rate limits
//     of each are decided here (controllers.go).
package setup
