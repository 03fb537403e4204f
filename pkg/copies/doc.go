// Package copies owns the copies of a delegate's dependencies in a secondary: the objects of the
// primary a delegate needs there (translate.DependencyKinds), made before the delegate is created
// and applied with the one ownership rule, whoever applies them.
//
// Reflector.Ensure runs in the proxy reconciler before a delegate is created: the ConfigMaps and
// Secrets the pod references (volumes, projected sources, env, envFrom, image pull secrets) are
// read in the primary and applied, and the ServiceAccount it runs as is created. A required one
// that is missing, or never copied (a ServiceAccount token), is a *Missing; a ServiceAccount of
// the secondary's own is a *ForeignServiceAccount. The dependency sync
// (pkg/controllers/dependency) keeps the copies true afterwards with the same Apply.
//
// The ownership rule: a copy is written with server-side apply as reflection's field manager,
// never read first (Secrets may not be read in a secondary); one a Replicator holds is left to it
// (one owner per copy); an immutable one whose content changed is replaced.
package copies
