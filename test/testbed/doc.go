// Package testbed starts and stops real local Kubernetes clusters for Flotilla's end-to-end tests,
// its demo and its benchmark, on machines without a container engine.
//
// Each cluster is a real kube-apiserver, etcd, kube-controller-manager and kube-scheduler started by
// kwokctl's binary runtime, with kwok standing in for kubelets. A bed has one primary (kwok manages
// only nodes annotated kwok.x-k8s.io/node=fake there, so Flotilla's virtual nodes stay Flotilla's)
// and any number of secondaries, each with fake nodes carrying capacity and topology labels.
//
// # Usage
//
//	bed, err := testbed.Start(ctx, testbed.Options{WorkDir: dir, Secondaries: 2})
//	defer bed.Stop(ctx)
//	cs := bed.Primary.Clientset
//
// # Implementation considerations
//
// kwokctl detaches the processes it starts (setsid) and records their PIDs under the work dir, so a
// bed outlives a crashed test process. Stop reads those PID files before asking kwokctl to delete
// the cluster and kills whatever is still alive by PID afterwards; StopDir does the same for a work
// dir left behind by an earlier run. Every run uses its own KWOK_WORKDIR, so a test run never
// touches the clusters of a running demo.
//
// The bed itself (its options, start-up, kubeconfigs, stop) is testbed.go; a running cluster's
// life (freeze, thaw, stop and start again, with its real node's agents) is lifecycle.go; the
// controllers kwokctl starts, started again when they exit as they start, are controllers.go.
//
// Another process uses a running bed through Bed.Handle and Attach (handle.go): the e2e suite's
// parallel Ginkgo processes share the one bed its first process starts. Only the process that
// started a bed stops or restarts its clusters and runs commands on its real nodes.
//
// Secondaries run with kwok's Stage CRD enabled and kwok's default stages loaded, except that the
// pod-complete stage finishes every pod whose restartPolicy is Never or OnFailure, not only Job
// pods: a delegate pod in a secondary is never owned by a Job there.
//
// Each secondary also has a default StorageClass, StorageClassLocalPath, served by rancher's
// local-path-provisioner on the host; its volumes are directories under Cluster.VolumesDir, made
// by helper pods on the volume's node, so only a real node holds data (localpath.go).
//
// As root, the primary can get one real node (Options.RealNode: containerd, a kubelet and
// kube-proxy on this host) and each secondary one too (Options.SecondaryRealNodes), each of the
// latter in a network namespace of its own; their teardown restores the host, also after a crash.
//
// Every cluster with a real node has a cluster DNS (dns.go): a CoreDNS on the host, built by
// `make tools` with the kubernetes plugin, reading its own cluster as a ServiceAccount of its own.
// It answers cluster.local, and clusterset.local from the cluster's Multi-Cluster Services
// ServiceImports (the bed installs the MCS CRDs there when absent, which a chart installed after
// takes over with helm's --take-ownership), and forwards nothing. Pods reach it at the ClusterIP
// of kube-system/kube-dns (the tenth address of the Service range, Cluster.DNSServiceIP), which
// the kubelet's clusterDNS names and kube-proxy sends to CoreDNS's free port on the host. Its PID
// file and log sit beside kwokctl's, so the cluster's teardown stops it and a failed spec keeps
// its log.
package testbed
