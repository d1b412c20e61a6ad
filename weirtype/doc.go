// Package weirtype holds the low-level types that weir's engine and its store
// drivers share: the job row, its states, the outcomes of an insert and the
// error recorded for each attempt. It imports nothing of weir's, so a driver
// can use it without importing the engine.
package weirtype
