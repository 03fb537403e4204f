// Package proxy is the reconciler of proxy pods, the pod side of Flotilla: for each proxy bound
// to a virtual node it creates the delegate in that secondary (Flotilla's own work queue, retried
// without limit), mirrors the delegate's status back in one deferred patch of the proxy's status
// only, and deletes the delegate before it lets the proxy go (the flotilla.dev/delegate
// finalizer). The Sweeper deletes delegates whose proxy is gone.
//
// Files: proxy_controller.go (setup, the Reconcile skeleton, delegate creation and deletion),
// proxy_status.go (what is written to the proxy's status), proxy_release.go (when a terminating
// proxy may go without proof that its delegate is gone), proxy_cache.go (what the primary's proxy
// cache keeps of a proxy), sweep.go.
//
// # Implementation considerations
//
// virtual-kubelet's pod controller is not used for this: its CreatePod path marks a
// restartPolicy: Never pod Failed on any transient error, stops retrying after 20 attempts, and
// its NotifyPods path writes whole pods back (reverting label and finalizer edits). Delegates are
// read from a label-selected informer per secondary that the cluster registry runs for
// delegates.Watch, watched through the registry's FilteredSource; each event worth a look
// (delegateNews) enqueues the proxy of the same namespace and name.
package proxy
