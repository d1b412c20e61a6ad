package eventretry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/weirhq/weir/eventretry"
)

// A handler that finds the event's document missing says so with
// NotQueryable and is tried again; one that finds the event invalid
// returns a plain error, and the event goes to the dead-letter function.
func Example() {
	r, err := eventretry.New(eventretry.Config{
		Service: "embedding",
		Logger:  slog.New(slog.DiscardHandler),
		DeadLetter: func(_ context.Context, dl eventretry.DeadLetter) error {
			fmt.Println("dead letter:", dl.AbandonedReason, dl.AttemptCount, dl.ErrorType, dl.LastError)
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ev := json.RawMessage(`{"chunk_ids":[]}`)
	err = r.Handle(context.Background(), ev, "embedding-none", func(ctx context.Context) error {
		return errors.New("event has no chunk ids")
	})
	fmt.Println("handled:", err == nil)
	// Output:
	// dead letter: non_retryable 1 *errors.errorString event has no chunk ids
	// handled: true
}
