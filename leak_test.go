package weir_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/leakcheck"
)

// TestStopLeavesNoGoroutineRunning: once Stop returns, nothing the client
// started runs on: not its producers, heartbeat, rescue, sweep or listen
// loops, nor a job's timers, nor a periodic job's scheduler. It runs
// without t.Parallel, so that no other test's goroutines start meanwhile,
// and once per store driver in turn; the store's own goroutines (its
// connection pools) started before the snapshot and are not counted.
func TestStopLeavesNoGoroutineRunning(t *testing.T) {
	for _, d := range []struct {
		name string
		open opener
	}{{"sqlite", sqliteStore}, {"postgres", postgresStore}} {
		t.Run(d.name, func(t *testing.T) {
			s := d.open(t)
			before := leakcheck.Take()
			ws := weir.NewWorkers()
			done := make(chan struct{}, 2)
			if err := weir.AddWorker(ws, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
				defer func() { done <- struct{}{} }()
				if j.Args.Name == "hang" {
					<-ctx.Done() // until Stop cancels it
					return ctx.Err()
				}
				return nil
			}), weir.KindConfig{Timeout: time.Hour, SLA: time.Hour}); err != nil {
				t.Fatal(err)
			}
			c, err := weir.NewClient(weir.Config{
				Store: s, Workers: ws, ID: "leak-" + d.name, Logger: testLogger(),
				PollEvery: 10 * time.Millisecond, ShutdownTimeout: 50 * time.Millisecond,
				Periodic: []weir.PeriodicJob{{Name: "tick", Schedule: "every 1 minute", Args: task{Name: "tick"}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Insert(ctx, task{Name: "hang"}, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Insert(ctx, task{Name: "quick"}, nil); err != nil {
				t.Fatal(err)
			}
			<-done // one job has run, the other runs or will
			sctx, cancel := context.WithTimeout(ctx, waitLimit)
			defer cancel()
			if err := c.Stop(sctx); err != nil {
				t.Fatal(err)
			}
			before.Check(t, 5*time.Second)
		})
	}
}
