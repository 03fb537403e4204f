// Package apicalls counts the manager's requests to the API servers it calls (the primary's and
// the secondaries'), by verb and resource, as flotilla_api_requests_total: what each kind of
// Flotilla's work costs those servers, which client-go's own request metrics (by host and HTTP
// method only) cannot tell. The round tripper wraps every client the manager makes.
package apicalls
