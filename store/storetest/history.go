package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// historyCases are the cases of what operators read: a workflow's
// history and the outbox's backlog.
func historyCases() []suiteCase {
	return []suiteCase{
		{"WorkflowHistoryRecordsEachCommittedChange", testWorkflowHistory},
		{"WorkflowHistoryInCallersTransaction", testWorkflowHistoryTransactional},
		{"WorkflowHistoryConcurrentAdvanceRecordsOnce", testWorkflowHistoryConcurrent},
		{"OutboxBacklogCountsThePending", testOutboxBacklog},
	}
}

// historyText is h as one line per entry: "version from>state status error".
func historyText(h []*store.WorkflowTransition) string {
	var b strings.Builder
	for _, t := range h {
		fmt.Fprintf(&b, "%d %s>%s %s %s|", t.Version, t.FromState, t.State, t.Status, t.Error)
	}
	return b.String()
}

func listHistory(t *testing.T, ex store.Executor, id string, after int64, limit int) []*store.WorkflowTransition {
	t.Helper()
	h, err := ex.ListWorkflowTransitions(context.Background(), id, after, limit)
	if err != nil {
		t.Fatalf("list transitions of %s: %v", id, err)
	}
	return h
}

func testWorkflowHistory(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	if got := listHistory(t, ex, "doc-1", 0, 0); len(got) != 0 {
		t.Fatalf("history of an unknown workflow: %s, want none", historyText(got))
	}
	if _, _, err := ex.CreateWorkflow(ctx, now, store.WorkflowParams{ID: "doc-1", Name: "ingest", State: "upload"}); err != nil {
		t.Fatal(err)
	}
	// A second create finds the workflow and records nothing.
	if _, _, err := ex.CreateWorkflow(ctx, now.Add(time.Second), store.WorkflowParams{ID: "doc-1", Name: "ingest", State: "other"}); err != nil {
		t.Fatal(err)
	}
	t1, t2 := now.Add(time.Minute), now.Add(2*time.Minute)
	if _, err := ex.AdvanceWorkflow(ctx, t1, store.AdvanceParams{ID: "doc-1", Version: 1, State: "index"}); err != nil {
		t.Fatal(err)
	}
	// A refused transition (a version passed) records nothing.
	if _, err := ex.AdvanceWorkflow(ctx, t1, store.AdvanceParams{ID: "doc-1", Version: 1, State: "nowhere"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("advance from a passed version: %v, want ErrConflict", err)
	}
	if _, err := ex.AdvanceWorkflow(ctx, t2, store.AdvanceParams{ID: "doc-1", Version: 2, State: "index", Status: weirtype.WorkflowFailed, Error: "index down"}); err != nil {
		t.Fatal(err)
	}
	got := listHistory(t, ex, "doc-1", 0, 0)
	want := "1 >upload running |2 upload>index running |3 index>index failed index down|"
	if historyText(got) != want {
		t.Fatalf("history %s, want %s", historyText(got), want)
	}
	for i, at := range []time.Time{now, t1, t2} {
		if got[i].WorkflowID != "doc-1" || !got[i].At.Equal(at) {
			t.Fatalf("entry %d: %+v, want workflow doc-1 at %v", i, *got[i], at)
		}
	}
	if page := listHistory(t, ex, "doc-1", 1, 1); historyText(page) != "2 upload>index running |" {
		t.Fatalf("page after version 1, limit 1: %s", historyText(page))
	}
	if page := listHistory(t, ex, "doc-1", 3, 0); len(page) != 0 {
		t.Fatalf("page after the last version: %s, want none", historyText(page))
	}
	for _, p := range []struct {
		after int64
		limit int
	}{{-1, 0}, {0, -1}} {
		if _, err := ex.ListWorkflowTransitions(ctx, "doc-1", p.after, p.limit); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("list after %d, limit %d: %v, want ErrInvalid", p.after, p.limit, err)
		}
	}
}

func testWorkflowHistoryTransactional(t *testing.T, h Harness) {
	s := migrated(t, h)
	ex := s.Executor()
	ctx := context.Background()
	if _, _, err := ex.CreateWorkflow(ctx, now, store.WorkflowParams{ID: "w", Name: "n", State: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		err := h.Tx(t, s, commit, func(tx store.Executor, _ func(string) error) error {
			if _, _, err := tx.CreateWorkflow(ctx, now, store.WorkflowParams{ID: fmt.Sprint("new-", commit), Name: "n", State: "a"}); err != nil {
				return err
			}
			_, err := tx.AdvanceWorkflow(ctx, now.Add(time.Minute), store.AdvanceParams{ID: "w", Version: 1, State: fmt.Sprint("b-", commit)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := historyText(listHistory(t, ex, "w", 0, 0)); got != "1 >a running |2 a>b-true running |" {
		t.Fatalf("history %s: want the committed transition only", got)
	}
	if got := listHistory(t, ex, "new-false", 0, 0); len(got) != 0 {
		t.Fatalf("a workflow created in a rolled-back transaction has history %s", historyText(got))
	}
	if got := historyText(listHistory(t, ex, "new-true", 0, 0)); got != "1 >a running |" {
		t.Fatalf("history of a workflow created in a committed transaction: %s", got)
	}
}

func testWorkflowHistoryConcurrent(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	if _, _, err := ex.CreateWorkflow(ctx, now, store.WorkflowParams{ID: "w", Name: "n", State: "a"}); err != nil {
		t.Fatal(err)
	}
	const runs = 8
	errs := make(chan error, runs)
	for i := range runs {
		go func() {
			_, err := ex.AdvanceWorkflow(ctx, now.Add(time.Minute), store.AdvanceParams{ID: "w", Version: 1, State: fmt.Sprint("s", i)})
			errs <- err
		}()
	}
	moved := 0
	for range runs {
		switch err := <-errs; {
		case err == nil:
			moved++
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("advance: %v", err)
		}
	}
	got := listHistory(t, ex, "w", 0, 0)
	wf, err := ex.GetWorkflow(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if moved != 1 || len(got) != 2 || got[1].FromState != "a" || got[1].State != wf.State || got[1].Version != wf.Version {
		t.Fatalf("%d moved; history %s, workflow at %s version %d: want one transition from a, recorded once", moved, historyText(got), wf.State, wf.Version)
	}
}

func testOutboxBacklog(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	backlog := func() store.OutboxBacklog {
		t.Helper()
		b, err := ex.OutboxBacklog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b := backlog(); b.Pending != 0 || !b.OldestCreatedAt.IsZero() {
		t.Fatalf("empty outbox: %+v, want nothing pending", b)
	}
	ids := addOutbox(t, ex, now, store.OutboxMessage{Topic: "t"})
	ids = append(ids, addOutbox(t, ex, now.Add(time.Second), store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t", Key: "k"})...)
	ids = append(ids, addOutbox(t, ex, now.Add(2*time.Second), store.OutboxMessage{Topic: "t", Key: "k"})...)
	if b := backlog(); b.Pending != 4 || !b.OldestCreatedAt.Equal(now) {
		t.Fatalf("four added: %+v, want 4 pending, the oldest at %v", b, now)
	}
	claimOutbox(t, ex, now.Add(3*time.Second), "r1", 10)
	// The oldest published; the second fails once; the third published;
	// the fourth still held.
	if n, err := ex.MarkPublished(ctx, now.Add(3*time.Second), "r1", []int64{ids[0], ids[2]}); err != nil || n != 2 {
		t.Fatalf("mark published: %d, %v", n, err)
	}
	if n, err := ex.RetryOutbox(ctx, now.Add(3*time.Second), "r1", ids[1:2], "nack", now.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("retry: %d, %v", n, err)
	}
	if b := backlog(); b.Pending != 2 || !b.OldestCreatedAt.Equal(now.Add(time.Second)) {
		t.Fatalf("after publishing two: %+v, want 2 pending (one retrying, one held), the oldest at %v", b, now.Add(time.Second))
	}
	if _, err := ex.MarkPublished(ctx, now.Add(4*time.Second), "r1", ids[3:]); err != nil {
		t.Fatal(err)
	}
	if b := backlog(); b.Pending != 1 || !b.OldestCreatedAt.Equal(now.Add(time.Second)) {
		t.Fatalf("after publishing three: %+v, want the retrying one", b)
	}
	got := claimOutbox(t, ex, now.Add(time.Hour), "r1", 10)
	if _, err := ex.MarkPublished(ctx, now.Add(time.Hour), "r1", weirtype.OutboxIDs(got)); err != nil {
		t.Fatal(err)
	}
	if b := backlog(); b.Pending != 0 || !b.OldestCreatedAt.IsZero() {
		t.Fatalf("all published: %+v, want nothing pending", b)
	}
}
