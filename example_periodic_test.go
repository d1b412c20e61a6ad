package weir_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/tempstore"
)

// CleanupArgs is the job kind of a periodic job.
type CleanupArgs struct{}

func (CleanupArgs) Kind() string { return "cleanup" }

// A periodic job every 15 minutes. The client inserts, at Start, the tick
// it has just passed, then each tick as it comes, with an idempotency key
// that makes it one job per tick however many clients run. (A fake clock
// stands in for the hours, so the example runs at once.)
func ExamplePeriodicJob() {
	ctx := context.Background()
	s := tempstore.MustOpen(ctx) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()

	ran := make(chan struct{})
	workers := weir.NewWorkers()
	err := weir.AddWorker(workers, weir.WorkFunc(func(ctx context.Context, j *weir.Job[CleanupArgs]) error {
		fmt.Println("cleanup for", j.ScheduledAt.Format("15:04"), "key", j.IdempotencyKey)
		ran <- struct{}{}
		return nil
	}), weir.KindConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fc := clock.NewFake(time.Date(2026, 1, 21, 2, 7, 0, 0, time.UTC))
	client, err := weir.NewClient(weir.Config{
		Store: s, Workers: workers, ID: "example", Clock: fc,
		LeaseFor: time.Hour, // longer than the fake clock's jump, which no heartbeat sees
		Logger:   slog.New(slog.DiscardHandler),
		Periodic: []weir.PeriodicJob{
			{Name: "cleanup", Schedule: "every 15 minutes", Args: CleanupArgs{}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	<-ran // 02:00, the tick before Start
	fc.Set(time.Date(2026, 1, 21, 2, 15, 0, 0, time.UTC))
	<-ran
	if err := client.Stop(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// cleanup for 02:00 key periodic/cleanup/2026-01-21T02:00:00Z
	// cleanup for 02:15 key periodic/cleanup/2026-01-21T02:15:00Z
}
