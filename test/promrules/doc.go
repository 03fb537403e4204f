// Package promrules runs test/tools/promrules, Prometheus's rule evaluation and PromQL parser built
// into the tools cache ($FLOTILLA_TOOLS_DIR/promrules, test/tools/install.sh set promrules), for the
// tests of the chart's alerts and dashboard: which alerts fire on given series or on a real scrape
// of the manager, and which metrics the dashboard's and the rules' queries name. Prometheus stays
// out of Flotilla's go.mod: its module would raise otel and other modules there.
package promrules
