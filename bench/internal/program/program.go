// Package program holds what the comparison programs' mains share: the
// flags each of them has, the logger of the systems they compare, and
// running until done or interrupted.
package program

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"
)

// Flags are -timeout, -cpuprofile and -v.
type Flags struct {
	Timeout    time.Duration
	CPUProfile string
	Verbose    bool
}

// Register defines the flags on the command line's flag set: -timeout,
// by default timeout, gives up limited (what it limits) after that long;
// -cpuprofile profiles the phase profiled; -v logs the warnings and
// errors of logged.
func (f *Flags) Register(timeout time.Duration, limited, profiled, logged string) {
	flag.DurationVar(&f.Timeout, "timeout", timeout, "give up "+limited+" after this long")
	flag.StringVar(&f.CPUProfile, "cpuprofile", "", "write a CPU profile of "+profiled+" to this file")
	flag.BoolVar(&f.Verbose, "v", false, "log the "+logged+" warnings and errors to stderr")
}

// Logger returns the logger of the systems a program compares: their
// warnings and errors on stderr when verbose, nothing otherwise.
func Logger(verbose bool) *slog.Logger {
	if verbose {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

// Main calls run with a context that an interrupt cancels and standard
// output; when run fails it prints the error after the program's name on
// standard error and exits with status 1.
func Main(name string, run func(ctx context.Context, out io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
