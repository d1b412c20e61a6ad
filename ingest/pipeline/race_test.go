//go:build race

package pipeline_test

// raceEnabled reports that the race detector is on: it slows the service
// many times over and changes what it allocates.
const raceEnabled = true
