package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// retentionCases are the cases of progress, output and retention.
func retentionCases() []suiteCase {
	return []suiteCase{
		{"ProgressIsLeaseGuarded", testProgress},
		{"ProgressRefusesBadValues", testProgressInvalid},
		{"CompleteOutputs", testCompleteOutputs},
		{"CompleteOutputsRefusesBadOutput", testCompleteOutputsInvalid},
		{"PurgeJobsDeletesOnlyOldFinalJobsOfTheKind", testPurgeJobs},
		{"PurgeJobsInBatches", testPurgeJobsBatches},
		{"PurgeJobsRefusesBadParams", testPurgeJobsInvalid},
		{"FinalJobKinds", testFinalJobKinds},
		{"SweepLeaseOneOwnerAtATime", testSweepLease},
	}
}

func testProgress(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migrated(t, h).Executor()
	j := claimOne(t, ex, store.InsertParams{Kind: "k"}, "w1")
	if got := getJob(t, ex, j.ID); got.Progress != nil {
		t.Fatalf("a new job has progress %+v", *got.Progress)
	}
	at := now.Add(time.Second)
	if err := ex.SetProgress(ctx, at, store.LeaseOf(j), weirtype.Progress{Percent: 42.5, Message: "page 17 of 40", Attempt: 99}); err != nil {
		t.Fatal(err)
	}
	got := getJob(t, ex, j.ID)
	want := weirtype.Progress{Percent: 42.5, Message: "page 17 of 40", Attempt: j.Attempt, At: at}
	if got.Progress == nil || *got.Progress != want {
		t.Fatalf("progress %+v, want %+v (Attempt and At from the lease and now)", got.Progress, want)
	}
	if got.State != weirtype.StateRunning || got.LeaseOwner != "w1" {
		t.Fatalf("a progress changed the job's state or lease: %+v", *got)
	}
	// Another worker, a stale attempt, a finished job: nothing written.
	for _, l := range []store.Lease{
		{ID: j.ID, Owner: "w2", Attempt: j.Attempt},
		{ID: j.ID, Owner: "w1", Attempt: j.Attempt + 1},
		{ID: 999999, Owner: "w1", Attempt: 1},
	} {
		if err := ex.SetProgress(ctx, at.Add(time.Second), l, weirtype.Progress{Percent: 1}); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("progress under lease %+v: %v, want ErrLeaseLost", l, err)
		}
	}
	if _, err := ex.Complete(ctx, at.Add(time.Second), store.LeaseOf(j)); err != nil {
		t.Fatal(err)
	}
	if err := ex.SetProgress(ctx, at.Add(2*time.Second), store.LeaseOf(j), weirtype.Progress{Percent: 100}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("progress of a completed job: %v, want ErrLeaseLost", err)
	}
	if got := getJob(t, ex, j.ID); got.Progress == nil || *got.Progress != want {
		t.Fatalf("after the lost writes, progress %+v, want %+v kept", got.Progress, want)
	}
}

func testProgressInvalid(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migrated(t, h).Executor()
	j := claimOne(t, ex, store.InsertParams{Kind: "k"}, "w1")
	for _, c := range []struct {
		p    weirtype.Progress
		name string
	}{
		{weirtype.Progress{Percent: -1}, "percent"},
		{weirtype.Progress{Percent: 100.5}, "percent"},
		{weirtype.Progress{Percent: 10, Message: strings.Repeat("x", weirtype.MaxProgressMessage+1)}, "message"},
		{weirtype.Progress{Percent: 10, Message: "bad \xff"}, "message"},
		{weirtype.Progress{Percent: 10, Message: "nul \x00"}, "message"},
	} {
		err := ex.SetProgress(ctx, now, store.LeaseOf(j), c.p)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("progress %+v: %v, want ErrInvalid naming the %s", c.p, err, c.name)
		}
	}
	if err := ex.SetProgress(ctx, now, store.LeaseOf(j), weirtype.Progress{Percent: 0, Message: strings.Repeat("é", weirtype.MaxProgressMessage/2)}); err != nil {
		t.Errorf("a message of exactly the limit: %v", err)
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

func testCompleteOutputs(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migrated(t, h).Executor()
	j1 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "co1"}, "w1")
	j2 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "co2"}, "w1")
	j3 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "co3"}, "w1")
	other := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "co4"}, "w2")
	if lost, err := ex.CompleteOutputs(ctx, now, nil); err != nil || len(lost) != 0 {
		t.Fatalf("complete of nothing: lost %v, %v", lost, err)
	}
	out1 := json.RawMessage(`{"pages": 40, "title": "Annual report"}`)
	at := now.Add(time.Second)
	lost, err := ex.CompleteOutputs(ctx, at, []store.Completion{
		{Lease: store.LeaseOf(j1), Output: out1},
		{Lease: store.Lease{ID: other.ID, Owner: "w1", Attempt: other.Attempt}, Output: json.RawMessage(`1`)},
		{Lease: store.LeaseOf(j2)},
		{Lease: store.LeaseOf(j3), Output: json.RawMessage(`null`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lost, []int64{other.ID}) {
		t.Fatalf("lost %v, want [%d] (held by another worker)", lost, other.ID)
	}
	g1 := getJob(t, ex, j1.ID)
	if g1.State != weirtype.StateCompleted || !g1.FinalizedAt.Equal(at) || g1.LeaseOwner != "" || !sameJSON(t, g1.Output, out1) {
		t.Fatalf("job completed with an output: %+v, output %s", *g1, g1.Output)
	}
	for _, id := range []int64{j2.ID, j3.ID} {
		if g := getJob(t, ex, id); g.State != weirtype.StateCompleted || g.Output != nil {
			t.Fatalf("job %d completed without an output (none, or null): state %s, output %q", id, g.State, g.Output)
		}
	}
	if g := getJob(t, ex, other.ID); g.State != weirtype.StateRunning || g.Output != nil {
		t.Fatalf("another worker's job was written: %+v", *g)
	}
	// A second completion of the same lease is lost and keeps the first
	// output.
	lost, err = ex.CompleteOutputs(ctx, at.Add(time.Second), []store.Completion{{Lease: store.LeaseOf(j1), Output: json.RawMessage(`"late"`)}})
	if err != nil || !slices.Equal(lost, []int64{j1.ID}) {
		t.Fatalf("second completion: lost %v, %v", lost, err)
	}
	if g := getJob(t, ex, j1.ID); !sameJSON(t, g.Output, out1) {
		t.Fatalf("a lost completion replaced the output with %s", g.Output)
	}
	// An output of exactly the limit is kept whole.
	j4 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "co5"}, "w1")
	big := json.RawMessage(`"` + strings.Repeat("a", weirtype.MaxOutput-2) + `"`)
	if _, err := ex.CompleteOutputs(ctx, at, []store.Completion{{Lease: store.LeaseOf(j4), Output: big}}); err != nil {
		t.Fatal(err)
	}
	if g := getJob(t, ex, j4.ID); !bytes.Equal(g.Output, big) {
		t.Fatalf("an output of %d bytes came back as %d bytes", len(big), len(g.Output))
	}
}

func testCompleteOutputsInvalid(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migrated(t, h).Executor()
	j1 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "ci1"}, "w1")
	j2 := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "ci2"}, "w1")
	for _, out := range []json.RawMessage{
		json.RawMessage(`"` + strings.Repeat("a", weirtype.MaxOutput-1) + `"`),
		json.RawMessage(`{"open": `),
		json.RawMessage(`"a\u0000b"`),
	} {
		_, err := ex.CompleteOutputs(ctx, now, []store.Completion{{Lease: store.LeaseOf(j1)}, {Lease: store.LeaseOf(j2), Output: out}})
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "output") {
			t.Errorf("output of %d bytes: %v, want ErrInvalid naming the output", len(out), err)
		}
	}
	for _, id := range []int64{j1.ID, j2.ID} {
		if g := getJob(t, ex, id); g.State != weirtype.StateRunning {
			t.Fatalf("a refused CompleteOutputs completed job %d", id)
		}
	}
}

// finishJob inserts a job of kind and leaves it in state (completed,
// cancelled or dead) at at.
func finishJob(t *testing.T, ex store.Executor, kind string, state weirtype.State, at time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	p := store.InsertParams{Kind: kind, Queue: "fin-" + kind}
	r := insertOne(t, ex, at.Add(-time.Minute), p)
	if state == weirtype.StateCancelled {
		if _, err := ex.Cancel(ctx, at, r.Job.ID); err != nil {
			t.Fatal(err)
		}
		return r.Job.ID
	}
	jobs := claim(t, ex, at.Add(-time.Second), p.Queue, "w", 1)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs of %s, want 1", len(jobs), p.Queue)
	}
	var err error
	if state == weirtype.StateDead {
		_, err = ex.Fail(ctx, store.FailParams{Now: at, Lease: store.LeaseOf(jobs[0]), Error: attemptErr(1, "boom"), Abandon: weirtype.AbandonPermanent})
	} else {
		_, err = ex.Complete(ctx, at, store.LeaseOf(jobs[0]))
	}
	if err != nil {
		t.Fatal(err)
	}
	return jobs[0].ID
}

func jobExists(t *testing.T, ex store.Executor, id int64) bool {
	t.Helper()
	_, err := ex.GetJob(context.Background(), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func testPurgeJobs(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migrated(t, h).Executor()
	old := now.Add(-48 * time.Hour)
	cutoff := now.Add(-24 * time.Hour)
	oldDone := finishJob(t, ex, "a", weirtype.StateCompleted, old)
	oldCancelled := finishJob(t, ex, "a", weirtype.StateCancelled, old)
	atCutoff := finishJob(t, ex, "a", weirtype.StateCompleted, cutoff)
	young := finishJob(t, ex, "a", weirtype.StateCompleted, now)
	oldDead := finishJob(t, ex, "a", weirtype.StateDead, old)
	otherKind := finishJob(t, ex, "b", weirtype.StateCompleted, old)
	waiting := insertOne(t, ex, old, store.InsertParams{Kind: "a", Queue: "waiting"}).Job.ID

	n, err := ex.PurgeJobs(ctx, store.PurgeJobsParams{Kind: "a", Before: cutoff, Limit: 100})
	if err != nil || n != 2 {
		t.Fatalf("purge = %d, %v; want 2 (the completed and the cancelled job older than the cutoff)", n, err)
	}
	for id, want := range map[int64]bool{
		oldDone: false, oldCancelled: false,
		atCutoff: true, young: true, // not before the cutoff
		oldDead:   true, // dead jobs go with their dead letters
		otherKind: true, waiting: true,
	} {
		if got := jobExists(t, ex, id); got != want {
			t.Errorf("job %d exists = %v, want %v", id, got, want)
		}
	}
	if dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{JobID: oldDead}); err != nil || len(dls) != 1 {
		t.Fatalf("dead letters of the dead job: %d, %v; want it kept", len(dls), err)
	}
	if n, err := ex.PurgeJobs(ctx, store.PurgeJobsParams{Kind: "a", Before: cutoff, Limit: 100}); err != nil || n != 0 {
		t.Fatalf("second purge = %d, %v; want 0", n, err)
	}
	// A job retried after it completed is waiting again: not purged.
	if _, err := ex.RetryJob(ctx, now, otherKind); err != nil {
		t.Fatal(err)
	}
	if n, err := ex.PurgeJobs(ctx, store.PurgeJobsParams{Kind: "b", Before: now, Limit: 100}); err != nil || n != 0 || !jobExists(t, ex, otherKind) {
		t.Fatalf("purge of a retried job = %d, %v; want it kept", n, err)
	}
}

func testPurgeJobsBatches(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migrated(t, h).Executor()
	var made []int64
	for i := range 7 {
		p := store.InsertParams{Kind: "k", Queue: "pb", IdempotencyKey: "key-" + string(rune('a'+i))}
		r := insertOne(t, ex, now.Add(-time.Hour), p)
		jobs := claim(t, ex, now.Add(-time.Hour), "pb", "w", 1)
		// Finalized one minute apart, in id order.
		if _, err := ex.Complete(ctx, now.Add(-time.Hour+time.Duration(i)*time.Minute), store.LeaseOf(jobs[0])); err != nil {
			t.Fatal(err)
		}
		made = append(made, r.Job.ID)
	}
	n, err := ex.PurgeJobs(ctx, store.PurgeJobsParams{Kind: "k", Before: now, Limit: 3})
	if err != nil || n != 3 {
		t.Fatalf("first batch = %d, %v; want 3", n, err)
	}
	for i, id := range made {
		if got, want := jobExists(t, ex, id), i >= 3; got != want {
			t.Fatalf("after one batch of 3, job %d (finalized %d min after the first) exists = %v, want %v: oldest first", id, i, got, want)
		}
	}
	if n, err := ex.PurgeJobs(ctx, store.PurgeJobsParams{Kind: "k", Before: now, Limit: 3}); err != nil || n != 3 {
		t.Fatalf("second batch = %d, %v; want 3", n, err)
	}
	if n, err := ex.PurgeJobs(ctx, store.PurgeJobsParams{Kind: "k", Before: now, Limit: 3}); err != nil || n != 1 {
		t.Fatalf("last batch = %d, %v; want 1", n, err)
	}
	// The keys of purged jobs make new jobs.
	r := insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "pb", IdempotencyKey: "key-a"})
	if r.Outcome != weirtype.Inserted {
		t.Fatalf("insert of a purged job's key: %s, want inserted", r.Outcome)
	}
}

func testPurgeJobsInvalid(t *testing.T, h Harness) {
	ex := migrated(t, h).Executor()
	for _, c := range []struct {
		p    store.PurgeJobsParams
		name string
	}{
		{store.PurgeJobsParams{Before: now, Limit: 1}, "kind"},
		{store.PurgeJobsParams{Kind: "k", Limit: 1}, "before"},
		{store.PurgeJobsParams{Kind: "k", Before: now}, "limit"},
		{store.PurgeJobsParams{Kind: "k", Before: now, Limit: -1}, "limit"},
		{store.PurgeJobsParams{Kind: "k", Before: now, Limit: store.MaxPurgeLimit + 1}, "limit"},
	} {
		if _, err := ex.PurgeJobs(context.Background(), c.p); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("purge %+v: %v, want ErrInvalid naming the %s", c.p, err, c.name)
		}
	}
}

func testFinalJobKinds(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migrated(t, h).Executor()
	if kinds, err := ex.FinalJobKinds(ctx); err != nil || len(kinds) != 0 {
		t.Fatalf("kinds of an empty store: %v, %v", kinds, err)
	}
	finishJob(t, ex, "zeta", weirtype.StateCompleted, now)
	finishJob(t, ex, "alpha", weirtype.StateCancelled, now)
	finishJob(t, ex, "alpha", weirtype.StateCompleted, now)
	finishJob(t, ex, "dead-only", weirtype.StateDead, now)
	insertOne(t, ex, now, store.InsertParams{Kind: "waiting-only"})
	kinds, err := ex.FinalJobKinds(ctx)
	if err != nil || !slices.Equal(kinds, []string{"alpha", "zeta"}) {
		t.Fatalf("kinds = %v, %v; want [alpha zeta] (completed or cancelled jobs only)", kinds, err)
	}
}

func testSweepLease(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migrated(t, h).Executor()
	take := func(at time.Time, name, owner string) bool {
		t.Helper()
		ok, err := ex.TakeSweepLease(ctx, at, name, owner, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !take(now, "retention", "p1") {
		t.Fatal("p1 did not get a free lease")
	}
	if take(now.Add(30*time.Second), "retention", "p2") {
		t.Fatal("p2 took the lease p1 holds")
	}
	if !take(now.Add(50*time.Second), "other", "p2") {
		t.Fatal("p2 did not get a lease of another name")
	}
	if !take(now.Add(40*time.Second), "retention", "p1") {
		t.Fatal("p1 could not renew its lease")
	}
	if take(now.Add(90*time.Second), "retention", "p2") {
		t.Fatal("p2 took the lease p1 renewed until 100 s")
	}
	if !take(now.Add(100*time.Second), "retention", "p2") {
		t.Fatal("p2 did not get the lease once p1's ended")
	}
	if take(now.Add(110*time.Second), "retention", "p1") {
		t.Fatal("p1 took back the lease p2 holds")
	}
	for _, c := range []struct {
		name, owner string
		d           time.Duration
		field       string
	}{{"", "p", time.Minute, "name"}, {"n", "", time.Minute, "owner"}, {"n", "p", 0, "lease"}} {
		if _, err := ex.TakeSweepLease(ctx, now, c.name, c.owner, c.d); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("lease %q %q %v: %v, want ErrInvalid naming the %s", c.name, c.owner, c.d, err, c.field)
		}
	}
}
