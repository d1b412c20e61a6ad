package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weirhq/weir/store"
)

// PostgreSQL cannot store a NUL byte in a text. A name that holds one is
// refused, as is an effect's result, which is returned as given; a
// workflow's error, free text, is kept with the NUL replaced.
func TestWorkflowTextWithNUL(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ex := s.Executor()
	ctx := context.Background()
	if _, _, err := ex.CreateWorkflow(ctx, now, store.WorkflowParams{ID: "a\x00b", Name: "n", State: "s"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("create with a NUL in the id: %v, want ErrInvalid", err)
	}
	if _, _, err := ex.CreateWorkflow(ctx, now, store.WorkflowParams{ID: "a", Name: "n", State: "s"}); err != nil {
		t.Fatal(err)
	}
	wf, err := ex.AdvanceWorkflow(ctx, now, store.AdvanceParams{ID: "a", Version: 1, State: "s", Status: "failed", Error: "bad\x00byte"})
	if err != nil || wf.Error != "bad\uFFFDbyte" {
		t.Fatalf("advance with a NUL in the error: %+v, %v; want it replaced by U+FFFD", wf, err)
	}
	k := store.EffectKey{Txn: "t"}
	if _, _, err := ex.BeginEffect(ctx, now, k); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.FinishEffect(ctx, now, k, "x\x00y"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("finish with a NUL in the result: %v, want ErrInvalid", err)
	}
	if recs, err := ex.ListEffects(ctx, "t"); err != nil || len(recs) != 1 || recs[0].Finished() {
		t.Fatalf("after a refused finish: %+v, %v; want the effect unfinished", recs, err)
	}
}

// Workflow ids, and effects' series, sort byte by byte whatever the
// database's collation, as they do in SQLite and Go.
func TestWorkflowOrderIsBytewise(t *testing.T) {
	t.Parallel()
	ex := migratedExecutor(t)
	ctx := context.Background()
	ids := []string{"ab", "B", "a-b", "a"}
	for _, id := range ids {
		if _, _, err := ex.CreateWorkflow(ctx, now, store.WorkflowParams{ID: id, Name: "n", State: "s"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ex.BeginEffect(ctx, now, store.EffectKey{Txn: "t", Series: id}); err != nil {
			t.Fatal(err)
		}
	}
	const want = "B,a,a-b,ab"
	wfs, err := ex.ListWorkflows(ctx, store.WorkflowFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, wf := range wfs {
		got = append(got, wf.ID)
	}
	if strings.Join(got, ",") != want {
		t.Fatalf("workflows: %s, want %s", strings.Join(got, ","), want)
	}
	recs, err := ex.ListEffects(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, r := range recs {
		got = append(got, r.Series)
	}
	if strings.Join(got, ",") != want {
		t.Fatalf("effects: %s, want %s", strings.Join(got, ","), want)
	}
	wfs, err = ex.ListWorkflows(ctx, store.WorkflowFilter{AfterID: "a", Limit: 1})
	if err != nil || len(wfs) != 1 || wfs[0].ID != "a-b" {
		t.Fatalf("the page after a: %v, %v; want a-b", wfs, err)
	}
}
