// Package bench holds weir's comparative benchmarks. It is a module of its
// own so that weir's module never depends on the projects it is compared
// with.
package bench
