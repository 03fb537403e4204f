// Package placement holds the pure rules of where elected pods go that more than one part of
// Flotilla applies: which clusters a pod chose (flotilla.dev/clusters, cluster-selector,
// cluster-weights), how a controller's pods split over clusters, and which moves bring them to
// that split. The webhook judges with them at admission and in a rebalance, over its full view of
// every secondary's nodes; flotillactl judges with them over the virtual nodes. No I/O.
package placement
