// Package bench holds weir's comparative benchmarks. It is a module of its
// own so that weir's module never depends on the projects it is compared
// with.
//
// The resilience policies are compared with go test benchmarks in
// bench/resilience; the job engine's throughput and latency are compared
// with River's by the command bench/cmd/jobbench:
//
//	cd bench && go run ./cmd/jobbench -store postgres -n 100000 -compare river
package bench
