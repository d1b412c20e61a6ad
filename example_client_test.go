package weir_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/tempstore"
	"github.com/weirhq/weir/resilience/backoff"
)

// ExtractArgs is a job kind: its value is the job's JSON payload.
type ExtractArgs struct {
	Path string `json:"path"`
}

func (ExtractArgs) Kind() string { return "extract" }

// Register a worker, insert a job, run it and stop.
func Example() {
	ctx := context.Background()
	s := tempstore.MustOpen(ctx) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()

	ran := make(chan string, 1)
	workers := weir.NewWorkers()
	err := weir.AddWorker(workers, weir.WorkFunc(func(ctx context.Context, j *weir.Job[ExtractArgs]) error {
		ran <- fmt.Sprintf("extracting %s (attempt %d)", j.Args.Path, j.Attempt)
		return nil
	}), weir.KindConfig{MaxAttempts: 3, Backoff: backoff.Exponential(5*time.Minute, 2, time.Hour)})
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := weir.NewClient(weir.Config{
		Store: s, Workers: workers, ID: "example",
		Logger: slog.New(slog.DiscardHandler), // keep the example's output to its prints
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	res, err := client.Insert(ctx, ExtractArgs{Path: "incoming/P001/session.txt"}, &weir.InsertOpts{IdempotencyKey: "P001/session.txt"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("insert:", res.Outcome)
	fmt.Println(<-ran) // the worker may run before Insert returns: print in order
	// Stop waits for the running job to be recorded.
	if err := client.Stop(ctx); err != nil {
		fmt.Println(err)
		return
	}
	j, err := s.Executor().GetJob(ctx, res.Job.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("job:", j.State, "after", j.Attempt, "attempt")
	// Output:
	// insert: inserted
	// extracting incoming/P001/session.txt (attempt 1)
	// job: completed after 1 attempt
}
