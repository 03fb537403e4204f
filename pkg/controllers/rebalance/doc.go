// Package rebalance owns the return of elected pods to a secondary that came back: with
// --rebalance-on-return, once a secondary whose virtual node carried the failover taint has been
// back and Ready for --rebalance-after, it evicts, through the primary's Eviction API (so
// PodDisruptionBudgets hold), one pod at a time of each controller that holds less there than
// placement would give it now, until none does. The controllers re-create the pods and the webhook
// places them. Where they should be is the webhook's judgement (Plan); when and how fast is this
// package's. It runs on the leader.
package rebalance
