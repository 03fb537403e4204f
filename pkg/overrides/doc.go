// Package overrides applies Overrides and ClusterOverrides: what a rule matches (an object by
// kind, name, labels or owner; a cluster by name or its virtual node's labels), and what it
// changes in the object Flotilla sends to that cluster (image parts, env, command, args,
// resources, labels, annotations, replicas, a JSON patch), in one order: ClusterOverrides by name,
// then the namespace's Overrides by name, each's rules in order. Pure: the proxy reconciler
// applies it to delegates, the Replicator's desired state to copies, `flotillactl render` to show
// both. A rule that cannot apply fails the whole object, which is then left as it was.
package overrides
