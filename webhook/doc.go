// Package webhook is Flotilla's mutating admission webhook: it turns a pod annotated
// flotilla.dev/elect (in a namespace labelled flotilla.dev/enabled=true) into a proxy pod bound
// at admission to the virtual node of a feasible secondary (weighted by free CPU;
// --proxy-placement=scheduler leaves the choice among the feasible virtual nodes to the primary's
// scheduler), keeps DaemonSets off virtual nodes, and admits a Replicator only when its author may
// write what it will write.
//
// Files: mutate.go and daemonset.go (the pure mutations, table-tested), handler.go (admission
// handlers over the cluster registry's snapshots), replicator.go (the rights a Replicator needs,
// table-tested, and their check by SubjectAccessReview as the requesting user), configuration.go (the
// MutatingWebhookConfiguration Flotilla owns), certificates.go (the CA shared by replicas, each
// replica's serving certificate and its renewal, a manager Runnable).
package webhook
