// Package installnames finds the names an installed manager gives its own objects: the prefix
// the chart's fullname sets (fullnameOverride), recorded on the manager's Deployment, so that
// flotillactl finds the webhook configuration, the Lease and the Secrets whatever they are called.
package installnames
