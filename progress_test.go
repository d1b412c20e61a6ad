package weir_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// A worker's progress is stored while it runs, under its lease, and its
// output with its success.
func TestProgressAndOutput(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		reported, proceed := make(chan error, 1), make(chan struct{})
		e := newEnvOn(t, open, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
			reported <- weir.SetProgress(ctx, 37.5, "page 15 of 40")
			<-proceed
			if err := weir.SetOutput(ctx, map[string]any{"pages": 40, "title": "Annual report"}); err != nil {
				return err
			}
			return weir.SetProgress(ctx, 100, "")
		}), weir.KindConfig{}, nil).start()
		j := e.insert(task{Name: "doc"}, nil)
		if err := <-reported; err != nil {
			t.Fatalf("SetProgress: %v", err)
		}
		got := e.job(j.ID)
		if p := got.Progress; p == nil || p.Percent != 37.5 || p.Message != "page 15 of 40" || p.Attempt != 1 || !p.At.Equal(e.fc.Now()) || got.State != weirtype.StateRunning {
			t.Fatalf("while running: state %s, progress %+v; want 37.5%% \"page 15 of 40\" at attempt 1, now", got.State, p)
		}
		close(proceed)
		done := e.waitState(j.ID, weirtype.StateCompleted, 1)
		var out struct {
			Pages int    `json:"pages"`
			Title string `json:"title"`
		}
		if err := json.Unmarshal(done.Output, &out); err != nil || out.Pages != 40 || out.Title != "Annual report" {
			t.Fatalf("output %s (%v); want pages 40 and the title", done.Output, err)
		}
		if p := done.Progress; p == nil || p.Percent != 100 || p.Message != "" {
			t.Fatalf("progress after the success: %+v, want 100%% without a message", p)
		}
	})
}

// An attempt whose job was cancelled (its lease lost) cannot write its
// progress, and its output is not stored.
func TestProgressOfALostLeaseIsRefused(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		running, proceed, reported := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		e := newEnvOn(t, open, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
			close(running)
			<-proceed
			reported <- weir.SetProgress(ctx, 50, "still going")
			return weir.SetOutput(ctx, "done")
		}), weir.KindConfig{}, nil).start()
		j := e.insert(task{}, nil)
		<-running
		if _, err := e.c.Cancel(context.Background(), j.ID); err != nil {
			t.Fatal(err)
		}
		close(proceed)
		if err := <-reported; !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("SetProgress after the job was cancelled: %v, want ErrLeaseLost", err)
		}
		got := e.job(j.ID)
		if got.State != weirtype.StateCancelled || got.Progress != nil || got.Output != nil {
			t.Fatalf("cancelled job: state %s, progress %+v, output %s; want neither written", got.State, got.Progress, got.Output)
		}
	})
}

// Bad progress is refused naming the field; an output over the limit is
// refused, and a success with it fails the attempt and abandons the job
// rather than store it cut.
func TestProgressAndOutputRefuseBadValues(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		errs := make(chan []error, 1)
		e := newEnvOn(t, open, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
			errs <- []error{
				weir.SetProgress(ctx, -1, ""),
				weir.SetProgress(ctx, 101, ""),
				weir.SetProgress(ctx, 50, strings.Repeat("x", weir.MaxProgressMessage+1)),
				weir.SetOutput(ctx, strings.Repeat("y", weir.MaxOutput)),
				weir.SetOutput(ctx, func() {}),
			}
			// The worker ignores the refusal and succeeds: the attempt
			// fails instead.
			_ = weir.SetOutput(ctx, strings.Repeat("y", weir.MaxOutput))
			return nil
		}), weir.KindConfig{}, nil).start()
		j := e.insert(task{}, nil)
		got := <-errs
		for i, want := range []string{"percent", "percent", "message", "output", "output"} {
			if !errors.Is(got[i], store.ErrInvalid) || !strings.Contains(got[i].Error(), want) {
				t.Errorf("bad value %d: %v, want ErrInvalid naming the %s", i, got[i], want)
			}
		}
		dead := e.waitState(j.ID, weirtype.StateDead, 1)
		if dead.Output != nil || len(dead.Errors) != 1 || !strings.Contains(dead.Errors[0].Message, "output") {
			t.Fatalf("job with an oversize output: output %d bytes, errors %+v; want none stored and the output named", len(dead.Output), dead.Errors)
		}
		if dl := e.deadLetter(j.ID); dl.Reason != weirtype.AbandonPermanent {
			t.Fatalf("dead letter reason %s, want %s", dl.Reason, weirtype.AbandonPermanent)
		}
		if err := weir.SetProgress(context.Background(), 1, ""); !errors.Is(err, weir.ErrNotInAttempt) {
			t.Fatalf("SetProgress outside an attempt: %v", err)
		}
		if err := weir.SetOutput(context.Background(), 1); !errors.Is(err, weir.ErrNotInAttempt) {
			t.Fatalf("SetOutput outside an attempt: %v", err)
		}
	})
}
