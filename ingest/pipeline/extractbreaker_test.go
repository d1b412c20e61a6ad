package pipeline_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/weirtype"
)

// brokenLLM is an extractor behind a breaker of its own, as the LLM
// extractor is: its first call fails, which opens the breaker; then it
// extracts.
type brokenLLM struct {
	b     *breaker.Breaker
	calls atomic.Int32
}

func (x *brokenLLM) Breaker() *breaker.Breaker { return x.b }

func (x *brokenLLM) Extract(ctx context.Context, in extract.Input) (res extract.Result, err error) {
	err = x.b.Do(ctx, func(ctx context.Context) error {
		if x.calls.Add(1) == 1 {
			return errors.New("503 service unavailable")
		}
		res, err = extract.NewLocal().Extract(ctx, in)
		return err
	})
	return res, err
}

// While the extractor's breaker is open the extract stage is paused in the
// store (visible as the breaker's pause), its documents not claimed; the
// probe at the breaker's probe time succeeds and the document is saved,
// the job having spent the failed attempt and the probe only.
func TestExtractStagePausedWhileItsBreakerIsOpen(t *testing.T) {
	t.Parallel()
	b, err := breaker.New(breaker.Config{Name: "llm", Strategy: breaker.Consecutive(1), OpenDelay: 2 * time.Second, HalfOpenSuccessRatio: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	x := &brokenLLM{b: b}
	h := newHarness(t, func(c *pipeline.Config) {
		c.Extractor = x
		c.Extract = pipeline.Stage{MaxAttempts: 3, Backoff: backoff.Constant(10 * time.Millisecond), Timeout: 30 * time.Second}
	})
	drop(t, h.dir, "pawns.txt", readCorpus(t, "notes/chess-doubled-pawns.txt"))
	h.start()
	waitFor(t, "the extract stage to be paused by its breaker", waitTimeout, func() (bool, string) {
		ps, err := h.db.Store.Executor().ListPauses(context.Background(), time.Now())
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if p.Kind == pipeline.KindExtract && p.Cause == weirtype.PauseBreaker && p.By == "llm" {
				return true, ""
			}
		}
		return false, "pauses: none of the extract stage's breaker"
	})
	waitFor(t, "the document to be saved and indexed", waitTimeout, func() (bool, string) { return settled(t, h.db, 1) })
	if got := x.calls.Load(); got != 2 {
		t.Errorf("the dependency was called %d times, want the failure and the probe", got)
	}
	j := jobOfDoc(t, h, pipeline.KindExtract, pipeline.DocumentID("pawns.txt", ""))
	if j == nil || j.State != weirtype.StateCompleted || j.Attempt != 2 {
		t.Errorf("extract job = %+v, want completed at attempt 2", j)
	}
	if ps, err := h.db.Store.Executor().ListPauses(context.Background(), time.Now()); err != nil || len(ps) != 0 {
		t.Errorf("pauses after the probe succeeded: %v, %v", ps, err)
	}
}
