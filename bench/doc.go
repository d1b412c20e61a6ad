// Package bench holds weir's comparative benchmarks. It is a module of its
// own so that weir's module never depends on the projects it is compared
// with.
//
// The resilience policies are compared with go test benchmarks in
// bench/resilience; the job engine's throughput and latency are compared
// with River's by the command bench/cmd/jobbench:
//
//	cd bench && go run ./cmd/jobbench -store postgres -n 100000 -compare river
//
// and their behaviour over time, under a steady producer and pressure
// (idle transactions, REPEATABLE READ readers, killed backends and
// workers, exhausted connections, a CPU-bound neighbour), by the command
// bench/cmd/loadbench:
//
//	cd bench && go run ./cmd/loadbench -quick
//	cd bench && go run ./cmd/loadbench -workers 4,16,64 -depth 4000 -phases clean:60s,active-readers:30s,idle-in-tx:30s
package bench
