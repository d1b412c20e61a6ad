// Package cpuprofile starts the CPU profile of a comparison program's timed
// phase.
package cpuprofile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// Start starts the CPU profile into the file path when path is set, and
// returns the function that stops it and closes the file.
func Start(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
