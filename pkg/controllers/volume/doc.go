// Package volume makes claims of the primary's StorageClass flotilla follow the elected pods that
// use them: the real claim is made in the secondary where the pod runs, and the primary's claim is
// bound to a PersistentVolume of the primary that stands for the real one.
//
// A claim's cluster is decided once, by the first of: the cluster it already names
// (flotilla.dev/volume-cluster), the virtual node the primary's scheduler selected for it, or the
// virtual node of a proxy using it. From then on the data decides where its pods go: the webhook
// places them only in that cluster (it reads the stand-in volume's cluster).
//
// # Implementation considerations
//
//   - The stand-in volume is made at once, before the real claim is bound: the primary's scheduler
//     (when it binds the proxy) waits for the claim to be bound, and the real claim binds only when
//     its delegate is scheduled in the secondary (WaitForFirstConsumer), which needs the proxy
//     bound. Its size becomes the real volume's once that is bound.
//   - The stand-in is a local volume with a node affinity on flotilla.dev/cluster: not attachable,
//     so the primary's attach-detach controller has nothing to do, and the scheduler's volume
//     binding checks the virtual node's label as for any local volume.
//   - Nothing deletes a real claim but the deletion of its primary claim: Flotilla holds
//     flotilla.dev/volume on the primary claim until the real one is gone (or its cluster is no
//     longer registered), and deletes only a real claim that carries this primary's label and the
//     primary claim's UID. The real claim has no owner reference: deleting the FlotillaPrimary
//     (an uninstall) never takes data with it.
//   - The real claim's class is the secondary's default StorageClass (its storageClassName is left
//     empty for the secondary's admission to fill).
package volume
