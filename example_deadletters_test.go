package weir_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/tempstore"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
)

// ParseArgs is the job kind of the dead-letter example.
type ParseArgs struct {
	Path string `json:"path"`
}

func (ParseArgs) Kind() string { return "parse" }

// A job whose worker gives up ends in the dead-letter store; the client
// finds it by its job id, shows it, requeues it once the cause is fixed,
// and purges what is left.
func ExampleClient_RequeueDeadLetters() {
	ctx := context.Background()
	s := tempstore.MustOpen(ctx) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()

	var fixed atomic.Bool // the parser is fixed after the first failure
	done := make(chan string, 1)
	workers := weir.NewWorkers()
	err := weir.AddWorker(workers, weir.WorkFunc(func(ctx context.Context, j *weir.Job[ParseArgs]) error {
		if !fixed.Load() {
			return retry.Permanent(errors.New("unsupported charset in " + j.Args.Path))
		}
		done <- fmt.Sprintf("parsed %s (attempt %d)", j.Args.Path, j.Attempt)
		return nil
	}), weir.KindConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := weir.NewClient(weir.Config{Store: s, Workers: workers, ID: "example", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := client.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer client.Stop(ctx)
	res, err := client.Insert(ctx, ParseArgs{Path: "incoming/P002/notes.txt"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}

	// Wait for the job's dead letter.
	byJob := weir.DeadLetterFilter{DeadLetterFilter: store.DeadLetterFilter{JobID: res.Job.ID}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		dls, err := client.ListDeadLetters(ctx, byJob)
		if err != nil {
			fmt.Println(err)
			return
		}
		if len(dls) == 1 {
			dl, err := client.GetDeadLetter(ctx, dls[0].ID)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("dead letter: %s after %d attempt: %s\n", dl.Reason, dl.Attempts, dl.LastError)
			fmt.Printf("payload: %s\n", dl.Payload)
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("no dead letter")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}

	fixed.Store(true)
	ids, err := client.RequeueDeadLetters(ctx, byJob)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("requeued:", len(ids), "job")
	fmt.Println(<-done)

	// Purge the dead letters older than 30 days: there are none.
	n, err := client.PurgeDeadLetters(ctx, weir.DeadLetterFilter{OlderThan: 30 * 24 * time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("purged:", n)
	// Output:
	// dead letter: non_retryable after 1 attempt: unsupported charset in incoming/P002/notes.txt
	// payload: {"path":"incoming/P002/notes.txt"}
	// requeued: 1 job
	// parsed incoming/P002/notes.txt (attempt 1)
	// purged: 0
}
