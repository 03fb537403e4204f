// Package webhook is Flotilla's admission webhook in the primary. It owns:
//
//   - Election: a pod annotated flotilla.dev/elect (in a namespace labelled
//     flotilla.dev/enabled=true) becomes a proxy pod, its scheduling constraints kept for its
//     delegate, refused when its delegate could not run as written in another cluster or under its
//     namespace's Pod Security level.
//   - Placement: which secondaries a proxy fits, given the clusters as the registry and the
//     virtual nodes show them, the pod's steering (flotilla.dev/clusters, cluster selector,
//     cluster weights, topology spread over clusters) and how many of its controller's proxies
//     each cluster already holds; and the one cluster it is bound to at admission (weighted by free
//     CPU; --proxy-placement=scheduler leaves the choice among the feasible virtual nodes to the
//     primary's scheduler). A proxy no cluster can take waits gated; Refit judges it again later.
//   - DaemonSets kept off virtual nodes, where their pods could never run.
//   - Replicators admitted only when their author may write what they will write.
//   - The MutatingWebhookConfiguration Flotilla owns, and the webhook's serving certificates.
//
// # Implementation considerations
//
// Decisions (Admit, Mutate and the placement under it, Refit, ExcludeVirtualNodes, the rights a
// Replicator needs) are pure functions over gathered input, table-tested without a client; the
// admission handlers only gather (registry snapshots, virtual nodes, namespaces, the proxy book)
// and answer. The names the webhook shares with the rest of Flotilla (labels, annotations, the
// configuration's name) live in pkg/apis/v1alpha1, so that code needing only the names does not
// import the webhook.
package webhook
