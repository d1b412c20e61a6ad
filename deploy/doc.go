// Package deploy holds what an operator deploys beside weir run, and the
// tests that keep it true to the code. It has no Go API.
//
//	prometheus/weir-alerts.yml       alert rules: spec 04's StuckDocumentsWarning,
//	                                 MaxRetriesExceededCritical and RetryJobFailed,
//	                                 and WeirBreakerOpen and WeirDeadLetterGrowth
//	prometheus/weir-alerts.test.yml  their unit tests, for promtool test rules
//	grafana/weir-dashboard.json      the Grafana dashboard "weir: Retry Policy
//	                                 Monitoring" (spec 04's panels and the engine's)
//
// The tests check both files with promtool (from Debian's prometheus
// package; a missing promtool skips them loudly, or fails them under
// WEIR_REQUIRE_SERVICES=1), and check that every metric an alert or a
// panel names is one weir registers: the names come from a registry
// populated by metrics.New and metrics.NewBreakerCollector, so that a
// renamed metric breaks the test rather than the dashboard.
package deploy
