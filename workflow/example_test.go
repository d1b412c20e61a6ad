package workflow_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/tempstore"
	"github.com/weirhq/weir/ledger"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/workflow"
)

// A workflow of two states, each run as a job of the client's: its state
// is persisted at every transition, so a process that dies between two
// states resumes from the last one. The label is printed through the
// effect ledger, once, however often the state runs.
func Example() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	s := tempstore.MustOpen(ctx) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()

	shipped := make(chan struct{})
	order := &workflow.Definition{Name: "order", Start: "charge", States: map[string]workflow.Handler{
		"charge": func(_ context.Context, r *workflow.Run) (workflow.Next, error) {
			fmt.Println("charge", r.Workflow.ID)
			return workflow.Goto("ship", []byte(`{"paid":true}`)), nil
		},
		"ship": func(ctx context.Context, r *workflow.Run) (workflow.Next, error) {
			label, err := r.Ledger.Do(ctx, store.EffectKey{Txn: r.Workflow.ID, Series: "label"}, ledger.Effect{
				Run: func(context.Context) (string, error) {
					fmt.Println("print the label of", r.Workflow.ID, "paid:", string(r.Workflow.Data))
					return "label-1", nil
				},
			})
			if err != nil {
				return workflow.Next{}, err
			}
			close(shipped)
			return workflow.Complete([]byte(`{"label":"` + label + `"}`)), nil
		},
	}}
	workers := weir.NewWorkers()
	eng, err := workflow.New(workflow.Config{Store: s, Workers: workers, Definitions: []*workflow.Definition{order}, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	client, err := weir.NewClient(weir.Config{Store: s, Workers: workers, ID: "example", PollEvery: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	// Started in the caller's transaction: with the order's rows, it commits or not.
	if err := s.InTx(ctx, func(ex store.Executor) error {
		_, _, err := eng.Start(ctx, ex, "order", "order-42", nil)
		return err
	}); err != nil {
		log.Fatal(err)
	}
	<-shipped
	if err := client.Stop(ctx); err != nil { // waits for the last step to be recorded
		log.Fatal(err)
	}

	wf, err := s.Executor().GetWorkflow(ctx, "order-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(wf.Status, "in", wf.State, string(wf.Data))
	history, err := s.Executor().ListWorkflowTransitions(ctx, "order-42", 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range history {
		fmt.Printf("version %d: %q -> %q\n", h.Version, h.FromState, h.State)
	}
	// Output:
	// charge order-42
	// print the label of order-42 paid: {"paid":true}
	// completed in ship {"label":"label-1"}
	// version 1: "" -> "charge"
	// version 2: "charge" -> "ship"
	// version 3: "ship" -> "ship"
}
