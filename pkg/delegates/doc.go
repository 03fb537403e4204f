// Package delegates owns what Flotilla keeps of its delegates in each secondary: the Watch the
// proxy reconciler declares (this primary's pods there, label flotilla.dev/primary=<ID>), the
// shape of its cache (what a delegate keeps in memory), the proof of deletion a watch's DELETED
// event gives, and the reads of that cache every other component uses (the sweep, namespace
// cleanup, the kubelet API's usage figures). The registry (pkg/clusters) only connects: it runs
// the informer this package describes.
package delegates
