// Package webhook is Flotilla's admission webhook in the primary. It owns:
//
//   - Election: a pod annotated flotilla.dev/elect (in a namespace labelled
//     flotilla.dev/enabled=true) becomes a proxy pod, its scheduling constraints kept for its
//     delegate, refused when its delegate could not run as written in another cluster or under its
//     namespace's Pod Security level.
//   - Placement at admission: it gathers the clusters (pkg/clusters/views), counts how many of
//     the pod's controller's proxies each cluster already holds (Spread, ProxyBook), and asks
//     pkg/placement where the proxy may go and which cluster it is bound to (weighted by free CPU;
//     --proxy-placement=scheduler leaves the choice among the feasible virtual nodes to the
//     primary's scheduler). A proxy no cluster can take waits gated; the proxy reconciler judges
//     it again later with the same package.
//   - DaemonSets kept off virtual nodes, where their pods could never run.
//   - Replicators admitted only when their author may write what they will write.
//   - The MutatingWebhookConfiguration Flotilla owns, and the webhook's serving certificates.
//
// # Implementation considerations
//
// Decisions (the election of a pod, pkg/election's Admit and Mutate, with pkg/placement's placement
// under it; ExcludeVirtualNodes; the rights a Replicator needs) are pure functions over gathered
// input, table-tested without a client; the admission handlers only gather (the cluster views, namespaces, claims, the proxy
// book) and answer. The names the webhook shares with the rest of Flotilla (labels, annotations, the
// configuration's name) live in pkg/apis/v1alpha1, so that code needing only the names does not
// import the webhook.
package webhook
