// Package resourcelists owns one shared copy of each distinct resource list the caches keep,
// because the pods of a workload, their proxies and their delegates all repeat the same lists.
//
// Every pod carries resource lists: each container's requests and limits, the resources its
// status reports, the overhead. The pods of one workload carry the same lists, and Flotilla
// caches each elected pod two or three times (the proxy, its delegate, the capacity watch's
// record). At 10,000 elected pods, the decoded lists were the largest single holder of the
// manager's heap (27 MB). A cache transform hands each list to Share, and the pods of a workload
// then hold one list between them.
//
// A shared list is read only, like everything a cache holds: a reader that would change one
// copies the object first (DeepCopy copies maps).
package resourcelists
