package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// workflowCases are the cases of the workflow contexts and the effect
// ledger.
func workflowCases() []suiteCase {
	return []suiteCase{
		{"WorkflowCreateGetAdvance", testWorkflowLifecycle},
		{"WorkflowRefusesBadParams", testWorkflowInvalid},
		{"WorkflowInCallersTransaction", testWorkflowTransactional},
		{"WorkflowList", testWorkflowList},
		{"WorkflowConcurrentAdvanceMovesOnce", testWorkflowConcurrentAdvance},
		{"WorkflowConcurrentCreatesMakeItOnce", testWorkflowConcurrentCreate},
		{"EffectBeginAndFinish", testEffectBeginFinish},
		{"EffectConcurrentBeginsBeginOnce", testEffectConcurrentBegin},
		{"EffectListAndCount", testEffectListCount},
	}
}

func testWorkflowLifecycle(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	wf, created, err := ex.CreateWorkflow(ctx, now, store.WorkflowParams{ID: "doc-1", Name: "ingest", State: "upload", Data: []byte(`{"n":1}`)})
	if err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	want := weirtype.Workflow{ID: "doc-1", Name: "ingest", State: "upload", Status: weirtype.WorkflowRunning, Data: []byte(`{"n":1}`), Version: 1,
		CreatedAt: now, UpdatedAt: now}
	checkWorkflow(t, "created", wf, want)
	again, created, err := ex.CreateWorkflow(ctx, now.Add(time.Second), store.WorkflowParams{ID: "doc-1", Name: "ingest", State: "other"})
	if err != nil || created {
		t.Fatalf("create again: %v, %v; want the existing one", created, err)
	}
	checkWorkflow(t, "created again", again, want)
	got, err := ex.GetWorkflow(ctx, "doc-1")
	if err != nil {
		t.Fatal(err)
	}
	checkWorkflow(t, "got", got, want)

	later := now.Add(time.Minute)
	moved, err := ex.AdvanceWorkflow(ctx, later, store.AdvanceParams{ID: "doc-1", Version: 1, State: "index", Data: []byte(`{"n":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	want.State, want.Data, want.Version, want.UpdatedAt = "index", []byte(`{"n":2}`), 2, later
	checkWorkflow(t, "advanced", moved, want)
	if _, err := ex.AdvanceWorkflow(ctx, later, store.AdvanceParams{ID: "doc-1", Version: 1, State: "index"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("advance from a version passed: %v, want ErrConflict", err)
	}
	done, err := ex.AdvanceWorkflow(ctx, later, store.AdvanceParams{ID: "doc-1", Version: 2, State: "index", Status: weirtype.WorkflowCompleted, Data: want.Data})
	if err != nil || done.Status != weirtype.WorkflowCompleted || done.Version != 3 {
		t.Fatalf("complete: %+v, %v", done, err)
	}
	if _, err := ex.AdvanceWorkflow(ctx, later, store.AdvanceParams{ID: "doc-1", Version: 3, State: "index"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("advance a completed workflow: %v, want ErrConflict", err)
	}
	if _, err := ex.GetWorkflow(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get an unknown workflow: %v, want ErrNotFound", err)
	}
	if _, err := ex.AdvanceWorkflow(ctx, later, store.AdvanceParams{ID: "nope", Version: 1, State: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("advance an unknown workflow: %v, want ErrNotFound", err)
	}
}

func checkWorkflow(t *testing.T, what string, got *weirtype.Workflow, want weirtype.Workflow) {
	t.Helper()
	if got.ID != want.ID || got.Name != want.Name || got.State != want.State || got.Status != want.Status || !bytes.Equal(got.Data, want.Data) ||
		got.Version != want.Version || got.Error != want.Error || !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("%s: %+v, want %+v", what, *got, want)
	}
}

func testWorkflowInvalid(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	for _, p := range []store.WorkflowParams{
		{Name: "n", State: "s"},
		{ID: "a", State: "s"},
		{ID: "a", Name: "n"},
		{ID: "a", Name: "n", State: "s", Data: bytes.Repeat([]byte("x"), weirtype.MaxWorkflowData+1)},
	} {
		if _, _, err := ex.CreateWorkflow(ctx, now, p); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("create %+v: %v, want ErrInvalid", p, err)
		}
	}
	if _, _, err := ex.CreateWorkflow(ctx, now, store.WorkflowParams{ID: "a", Name: "n", State: "s"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.AdvanceParams{
		{ID: "a", Version: 1},
		{ID: "a", Version: 1, State: "t", Status: "paused"},
		{ID: "a", Version: 1, State: "t", Data: bytes.Repeat([]byte("x"), weirtype.MaxWorkflowData+1)},
	} {
		if _, err := ex.AdvanceWorkflow(ctx, now, p); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("advance %+v: %v, want ErrInvalid", p, err)
		}
	}
	if wf, err := ex.GetWorkflow(ctx, "a"); err != nil || wf.Version != 1 || wf.State != "s" {
		t.Fatalf("after refused advances: %+v, %v; want it unchanged", wf, err)
	}
	for _, k := range []store.EffectKey{{Series: "blob"}, {Txn: "t", Ordinal: -1}} {
		if _, _, err := ex.BeginEffect(ctx, now, k); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("begin %+v: %v, want ErrInvalid", k, err)
		}
	}
}

func testWorkflowTransactional(t *testing.T, h Harness) {
	s := migrated(t, h)
	for _, commit := range []bool{false, true} {
		err := h.Tx(t, s, commit, func(ex store.Executor, _ func(string) error) error {
			_, _, err := ex.CreateWorkflow(context.Background(), now, store.WorkflowParams{ID: fmt.Sprint("wf-", commit), Name: "n", State: "s"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ex := s.Executor()
	if _, err := ex.GetWorkflow(context.Background(), "wf-false"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a workflow created in a rolled-back transaction: %v, want ErrNotFound", err)
	}
	if _, err := ex.GetWorkflow(context.Background(), "wf-true"); err != nil {
		t.Fatalf("a workflow created in a committed transaction: %v", err)
	}
}

func testWorkflowList(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	for i := range 6 {
		name := "ingest"
		if i%3 == 2 {
			name = "reindex"
		}
		at := now.Add(time.Duration(i) * time.Minute)
		if _, _, err := ex.CreateWorkflow(ctx, at, store.WorkflowParams{ID: fmt.Sprint("w", i), Name: name, State: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ex.AdvanceWorkflow(ctx, now.Add(time.Hour), store.AdvanceParams{ID: "w0", Version: 1, State: "a", Status: weirtype.WorkflowFailed, Error: "timed out"}); err != nil {
		t.Fatal(err)
	}
	ids := func(f store.WorkflowFilter) string {
		t.Helper()
		wfs, err := ex.ListWorkflows(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, wf := range wfs {
			out = append(out, wf.ID)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		f    store.WorkflowFilter
		want string
	}{
		{store.WorkflowFilter{}, "w0,w1,w2,w3,w4,w5"},
		{store.WorkflowFilter{Status: weirtype.WorkflowRunning}, "w1,w2,w3,w4,w5"},
		{store.WorkflowFilter{Status: weirtype.WorkflowFailed}, "w0"},
		{store.WorkflowFilter{Name: "reindex"}, "w2,w5"},
		{store.WorkflowFilter{Status: weirtype.WorkflowRunning, UpdatedBefore: now.Add(3 * time.Minute)}, "w1,w2"},
		{store.WorkflowFilter{AfterID: "w2", Limit: 2}, "w3,w4"},
	} {
		if got := ids(c.f); got != c.want {
			t.Fatalf("list %+v: %s, want %s", c.f, got, c.want)
		}
	}
	if wf, err := ex.GetWorkflow(ctx, "w0"); err != nil || wf.Error != "timed out" {
		t.Fatalf("the failed workflow: %+v, %v", wf, err)
	}
}

func testWorkflowConcurrentAdvance(t *testing.T, h Harness) {
	s := migrated(t, h)
	ctx := context.Background()
	if _, _, err := s.Executor().CreateWorkflow(ctx, now, store.WorkflowParams{ID: "w", Name: "n", State: "a"}); err != nil {
		t.Fatal(err)
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		won       int
		conflicts int
		other     []error
	)
	for i := range 12 {
		wg.Go(func() {
			_, err := s.Executor().AdvanceWorkflow(ctx, now, store.AdvanceParams{ID: "w", Version: 1, State: fmt.Sprint("b", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, store.ErrConflict):
				conflicts++
			default:
				other = append(other, err)
			}
		})
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatal(errors.Join(other...))
	}
	if won != 1 || conflicts != 11 {
		t.Fatalf("%d advances from version 1 won and %d conflicted, want 1 and 11", won, conflicts)
	}
	if wf, err := s.Executor().GetWorkflow(ctx, "w"); err != nil || wf.Version != 2 {
		t.Fatalf("after the race: %+v, %v; want version 2", wf, err)
	}
}

// testWorkflowConcurrentCreate: concurrent creates of one workflow make
// it once, and each of the others reads the workflow the winner made (on
// PostgreSQL, the read that follows an insert which found the id must see
// the row committed after the insert began).
func testWorkflowConcurrentCreate(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	var (
		mu     sync.Mutex
		states = map[string]int{}
	)
	created := madeAtOnce(t, 16, func(i int) (bool, error) {
		wf, made, err := ex.CreateWorkflow(context.Background(), now, store.WorkflowParams{ID: "w", Name: "n", State: fmt.Sprint("s", i)})
		if err == nil {
			mu.Lock()
			states[wf.State]++
			mu.Unlock()
		}
		return made, err
	})
	if created != 1 || len(states) != 1 {
		t.Fatalf("%d of 16 concurrent creates made the workflow, and they returned the states %v; want 1, and one state", created, states)
	}
}

// madeAtOnce runs call(i) for each i below n at once, fails the test with
// the errors of the calls that failed, and returns how many calls made
// what they were after (their true).
func madeAtOnce(t *testing.T, n int, call func(i int) (made bool, err error)) int {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		made int
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			m, err := call(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if m {
				made++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	return made
}

func testEffectBeginFinish(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	k := store.EffectKey{Txn: "doc-1", Series: "blob", Ordinal: 3}
	rec, begun, err := ex.BeginEffect(ctx, now, k)
	if err != nil || !begun || rec.Attempts != 1 || rec.Finished() || !rec.StartedAt.Equal(now) || rec.Txn != k.Txn || rec.Series != k.Series || rec.Ordinal != k.Ordinal {
		t.Fatalf("begin: %+v, %v, %v", rec, begun, err)
	}
	// Begun again without a result: a run cut short; the caller resolves it.
	rec, begun, err = ex.BeginEffect(ctx, now.Add(time.Second), k)
	if err != nil || begun || rec.Attempts != 2 || rec.Finished() {
		t.Fatalf("begin an unfinished effect again: %+v, %v, %v; want the record, 2 attempts", rec, begun, err)
	}
	done := now.Add(2 * time.Second)
	rec, err = ex.FinishEffect(ctx, done, k, "blobs/doc-1/3")
	if err != nil || !rec.Finished() || !rec.FinishedAt.Equal(done) || rec.Result != "blobs/doc-1/3" {
		t.Fatalf("finish: %+v, %v", rec, err)
	}
	rec, begun, err = ex.BeginEffect(ctx, now.Add(time.Hour), k)
	if err != nil || begun || rec.Result != "blobs/doc-1/3" || rec.Attempts != 2 {
		t.Fatalf("begin a finished effect: %+v, %v, %v; want its result, attempts unchanged", rec, begun, err)
	}
	rec, err = ex.FinishEffect(ctx, now.Add(time.Hour), k, "blobs/other")
	if err != nil || rec.Result != "blobs/doc-1/3" || !rec.FinishedAt.Equal(done) {
		t.Fatalf("finish again: %+v, %v; want the first result kept", rec, err)
	}
	if _, err := ex.FinishEffect(ctx, now, store.EffectKey{Txn: "doc-1", Series: "blob", Ordinal: 4}, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("finish an effect never begun: %v, want ErrNotFound", err)
	}
}

func testEffectConcurrentBegin(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	k := store.EffectKey{Txn: "doc-1", Series: "index"}
	begun := madeAtOnce(t, 16, func(int) (bool, error) {
		_, b, err := ex.BeginEffect(context.Background(), now, k)
		return b, err
	})
	if begun != 1 {
		t.Fatalf("%d of 16 concurrent begins began the effect, want 1", begun)
	}
}

func testEffectListCount(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	for _, k := range []store.EffectKey{
		{Txn: "t1", Series: "blob", Ordinal: 2}, {Txn: "t1", Series: "blob", Ordinal: 1}, {Txn: "t1", Series: "index", Ordinal: 1},
		{Txn: "t1", Series: "blob", Ordinal: 3}, {Txn: "t2", Series: "blob", Ordinal: 1},
	} {
		if _, _, err := ex.BeginEffect(ctx, now, k); err != nil {
			t.Fatal(err)
		}
		if k.Ordinal != 3 {
			if _, err := ex.FinishEffect(ctx, now, k, fmt.Sprint(k.Series, "/", k.Ordinal)); err != nil {
				t.Fatal(err)
			}
		}
	}
	recs, err := ex.ListEffects(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s/%d:%s", r.Series, r.Ordinal, r.Result))
	}
	if want := "blob/1:blob/1 blob/2:blob/2 blob/3: index/1:index/1"; strings.Join(got, " ") != want {
		t.Fatalf("list t1: %s, want %s", strings.Join(got, " "), want)
	}
	counts, err := ex.CountEffects(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"blob": 2, "index": 1}; !maps.Equal(counts, want) {
		t.Fatalf("count t1: %v, want %v (finished effects only)", counts, want)
	}
	if counts, err := ex.CountEffects(ctx, "none"); err != nil || len(counts) != 0 {
		t.Fatalf("count of an unknown txn: %v, %v", counts, err)
	}
}
