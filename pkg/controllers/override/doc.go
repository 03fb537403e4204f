// Package override keeps an Override's or ClusterOverride's Applied condition at its generation:
// True (RulesValid) when its spec changes and every selector parses, False (SelectorInvalid)
// otherwise. The proxy reconciler and the Replicator's say on it (views.RecordOverrideFailure)
// when a rule could not apply to an object, until the spec changes again.
package override
