package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

func deadlineCases() []suiteCase {
	return []suiteCase{
		{"ExpireDeadlines", testExpireDeadlines},
		{"CompleteLateOfAHeldLease", testCompleteLateHeld},
		{"CompleteLateRefusesWhatIsNotLate", testCompleteLateNotLate},
		{"CompleteLateAfterExpiry", testCompleteLateAfterExpiry},
		{"AcceptLateResult", testAcceptLateResult},
		{"AcceptLateResultOfARequeuedJob", testAcceptLateResultConflict},
		{"LateResultOutlivesAPurge", testLateResultPurged},
		{"ListStuck", testListStuck},
		{"RequeueClearsTheDeadlineAndRecordsItself", testRequeueAfterDeadline},
		{"CountJobs", testCountJobs},
	}
}

func testExpireDeadlines(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	at := now.Add(time.Hour)
	waiting := insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "d1", DeadlineAt: now.Add(20 * time.Minute)}).Job
	later := insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "d1", ScheduledAt: now.Add(2 * time.Hour), DeadlineAt: now.Add(30 * time.Minute)}).Job
	running := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "d2", DeadlineAt: now.Add(40 * time.Minute)}, "w1")
	onTime := insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "d3", DeadlineAt: at}).Job // a deadline equal to now has not passed
	none := insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "d3"}).Job
	done := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "d4", DeadlineAt: now.Add(10 * time.Minute)}, "w1")
	if _, err := ex.Complete(ctx, now, store.LeaseOf(done)); err != nil {
		t.Fatal(err)
	}

	first, err := ex.ExpireDeadlines(ctx, at, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Each job comes with its kind and queue, so that the engine can
	// count and log it without reading it back.
	if want := []store.JobRef{{ID: waiting.ID, Kind: "k", Queue: "d1"}, {ID: later.ID, Kind: "k", Queue: "d1"}}; !slices.Equal(first, want) {
		t.Fatalf("first expiry %v, want the two earliest deadlines %v", first, want)
	}
	rest, err := ex.ExpireDeadlines(ctx, at, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.JobRef{{ID: running.ID, Kind: "k", Queue: "d2"}}; !slices.Equal(rest, want) {
		t.Fatalf("second expiry %v, want %v", rest, want)
	}
	if again, err := ex.ExpireDeadlines(ctx, at, 100); err != nil || len(again) != 0 {
		t.Fatalf("third expiry %v, %v; want nothing", again, err)
	}
	for _, id := range []int64{waiting.ID, later.ID, running.ID} {
		j := getJob(t, ex, id)
		last := j.Errors[len(j.Errors)-1]
		if j.State != weirtype.StateDead || !j.FinalizedAt.Equal(at) || !j.LeaseExpiresAt.IsZero() ||
			last.Type != weirtype.ErrorTypeDeadlineExceeded || !last.At.Equal(at) || last.Attempt != j.Attempt || last.Message == "" {
			t.Fatalf("expired job %+v", *j)
		}
	}
	if r := getJob(t, ex, running.ID); r.LeaseOwner != "w1" || r.Attempt != 1 {
		t.Fatalf("an expired running job keeps its owner and attempt for a late result: %+v", *r)
	}
	for _, id := range []int64{onTime.ID, none.ID} {
		if j := getJob(t, ex, id); j.State != weirtype.StateAvailable {
			t.Fatalf("job %d expired: %+v", id, *j)
		}
	}
	if j := getJob(t, ex, done.ID); j.State != weirtype.StateCompleted {
		t.Fatalf("a completed job expired: %+v", *j)
	}
	lost, err := ex.Heartbeat(ctx, at, []store.Lease{store.LeaseOf(running)}, lease)
	if err != nil || !slices.Equal(lost, []int64{running.ID}) {
		t.Fatalf("heartbeat of an expired job: lost %v, %v; want it lost", lost, err)
	}
	if _, err := ex.Complete(ctx, at, store.LeaseOf(running)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("complete of an expired job: %v, want ErrLeaseLost", err)
	}
	dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{Reason: weirtype.AbandonDeadline})
	if err != nil || len(dls) != 3 {
		t.Fatalf("dead letters %v, %v; want three", dls, err)
	}
	for _, dl := range dls {
		if dl.ErrorType != weirtype.ErrorTypeDeadlineExceeded || !dl.FailedAt.Equal(at) {
			t.Fatalf("dead letter %+v", *dl)
		}
	}
}

func testCompleteLateHeld(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	deadline := now.Add(time.Minute)
	j := claimOne(t, ex, store.InsertParams{Kind: "grade", Queue: "late1", DeadlineAt: deadline}, "w1")
	at := now.Add(2 * time.Minute)
	if _, _, err := ex.CompleteLate(ctx, at, store.Lease{ID: j.ID, Owner: "w2", Attempt: 1}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late completion by another worker: %v, want ErrLeaseLost", err)
	}
	if got := getJob(t, ex, j.ID); got.State != weirtype.StateRunning {
		t.Fatalf("a refused late completion changed the job: %+v", *got)
	}
	lr, abandoned, err := ex.CompleteLate(ctx, at, store.LeaseOf(j))
	if err != nil {
		t.Fatal(err)
	}
	if !abandoned {
		t.Fatal("a late completion of a held lease did not say it abandoned the job")
	}
	if lr.ID == 0 || lr.JobID != j.ID || lr.Kind != "grade" || lr.Queue != "late1" || lr.Attempt != 1 || lr.Owner != "w1" ||
		!lr.DeadlineAt.Equal(deadline) || !lr.ReceivedAt.Equal(at) || !lr.AcceptedAt.IsZero() {
		t.Fatalf("late result %+v", *lr)
	}
	got := getJob(t, ex, j.ID)
	if got.State != weirtype.StateDead || got.Errors[len(got.Errors)-1].Type != weirtype.ErrorTypeDeadlineExceeded {
		t.Fatalf("job after a late completion %+v, want dead past its deadline", *got)
	}
	dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{Reason: weirtype.AbandonDeadline})
	if err != nil || len(dls) != 1 || dls[0].JobID != j.ID {
		t.Fatalf("dead letters %v, %v; want the job's", dls, err)
	}
	again, abandoned, err := ex.CompleteLate(ctx, at.Add(time.Second), store.LeaseOf(j))
	if err != nil || again.ID != lr.ID || abandoned {
		t.Fatalf("second late completion: %+v, abandoned %v, %v; want the first result, the job abandoned before", again, abandoned, err)
	}
	all, err := ex.ListLateResults(ctx, store.LateResultFilter{})
	if err != nil || len(all) != 1 {
		t.Fatalf("late results %v, %v; want one", all, err)
	}
}

// testCompleteLateNotLate: a job without a deadline cannot be late, nor
// can a held attempt whose deadline has not passed (it is completed
// instead); both are a caller's mistake, refused as invalid, and change
// nothing.
func testCompleteLateNotLate(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	none := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "none"}, "w1")
	early := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "early", DeadlineAt: now.Add(time.Hour)}, "w1")
	for _, c := range []struct {
		name, says string
		at         time.Time
		l          store.Lease
	}{
		{"no deadline", "has no deadline", now.Add(time.Hour), store.LeaseOf(none)},
		{"deadline not passed", "has not passed", now.Add(time.Hour), store.LeaseOf(early)},
		{"no owner", "owner", now.Add(time.Hour), store.Lease{ID: early.ID, Attempt: 1}},
		{"zero time", "now", time.Time{}, store.LeaseOf(early)},
	} {
		if _, _, err := ex.CompleteLate(ctx, c.at, c.l); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.says)
		}
	}
	for _, j := range []*weirtype.Job{none, early} {
		if got := getJob(t, ex, j.ID); got.State != weirtype.StateRunning || len(got.Errors) != 0 {
			t.Fatalf("job after a refused late completion: %+v", *got)
		}
	}
	if lrs, err := ex.ListLateResults(ctx, store.LateResultFilter{}); err != nil || len(lrs) != 0 {
		t.Fatalf("late results %v, %v; want none", lrs, err)
	}
}

func testCompleteLateAfterExpiry(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	running := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "late2", DeadlineAt: now.Add(time.Minute)}, "w1")
	// A job abandoned for another reason has no late result.
	other := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "late3", DeadlineAt: now.Add(time.Minute)}, "w1")
	if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(other), Error: attemptErr(1, "bad"), Abandon: weirtype.AbandonPermanent}); err != nil {
		t.Fatal(err)
	}
	// A job that never ran has no lease to complete with.
	waiting := insertOne(t, ex, now, store.InsertParams{Kind: "k", Queue: "late4", DeadlineAt: now.Add(time.Minute)}).Job
	at := now.Add(2 * time.Minute)
	if _, err := ex.ExpireDeadlines(ctx, at, 100); err != nil {
		t.Fatal(err)
	}
	lr, abandoned, err := ex.CompleteLate(ctx, at.Add(time.Second), store.LeaseOf(running))
	if err != nil || lr.JobID != running.ID || !lr.ReceivedAt.Equal(at.Add(time.Second)) || abandoned {
		t.Fatalf("late completion after expiry: %+v, abandoned %v, %v; want a result, the job abandoned by the expiry", lr, abandoned, err)
	}
	for _, l := range []store.Lease{
		store.LeaseOf(other),
		{ID: waiting.ID, Owner: "w1", Attempt: 0},
		{ID: running.ID, Owner: "w1", Attempt: 2},
		{ID: 999999, Owner: "w1", Attempt: 1},
	} {
		if _, _, err := ex.CompleteLate(ctx, at, l); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("late completion of %+v: %v, want ErrLeaseLost", l, err)
		}
	}
	if all, err := ex.ListLateResults(ctx, store.LateResultFilter{}); err != nil || len(all) != 1 {
		t.Fatalf("late results %v, %v; want one", all, err)
	}
}

func testAcceptLateResult(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	var results []*weirtype.LateResult
	for i, kind := range []string{"a", "b", "a"} {
		_, lr := lateResult(t, ex, store.InsertParams{Kind: kind, Queue: "acc" + string(rune('0'+i))})
		results = append(results, lr)
	}
	at := now.Add(time.Hour)
	acc, err := ex.AcceptLateResult(ctx, at, results[0].ID)
	if err != nil || !acc.AcceptedAt.Equal(at) || acc.JobID != results[0].JobID {
		t.Fatalf("accept: %+v, %v", acc, err)
	}
	j := getJob(t, ex, results[0].JobID)
	if j.State != weirtype.StateCompleted || !j.FinalizedAt.Equal(at) || j.LeaseOwner != "" {
		t.Fatalf("job of an accepted late result %+v, want completed", *j)
	}
	if dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{IDs: nil, Kind: "a"}); err != nil || len(dls) != 1 || dls[0].JobID != results[2].JobID {
		t.Fatalf("dead letters of kind a: %v, %v; want only the unaccepted job's", dls, err)
	}
	if _, err := ex.AcceptLateResult(ctx, at, results[0].ID); !errors.Is(err, store.ErrFinal) {
		t.Fatalf("second accept: %v, want ErrFinal", err)
	}
	if _, err := ex.AcceptLateResult(ctx, at, 999999); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("accept of a missing result: %v, want ErrNotFound", err)
	}
	for _, c := range []struct {
		name string
		f    store.LateResultFilter
		want []int64
	}{
		{"all", store.LateResultFilter{}, []int64{results[0].ID, results[1].ID, results[2].ID}},
		{"pending", store.LateResultFilter{Pending: true}, []int64{results[1].ID, results[2].ID}},
		{"kind", store.LateResultFilter{Kind: "a"}, []int64{results[0].ID, results[2].ID}},
		{"job", store.LateResultFilter{JobID: results[1].JobID}, []int64{results[1].ID}},
		{"page", store.LateResultFilter{AfterID: results[0].ID, Limit: 1}, []int64{results[1].ID}},
	} {
		got, err := ex.ListLateResults(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var gotIDs []int64
		for _, lr := range got {
			gotIDs = append(gotIDs, lr.ID)
		}
		if !slices.Equal(gotIDs, c.want) {
			t.Fatalf("%s: late results %v, want %v", c.name, gotIDs, c.want)
		}
	}
}

func testAcceptLateResultConflict(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	j, lr := lateResult(t, ex, store.InsertParams{Kind: "k", Queue: "conflict"})
	if _, err := ex.RequeueDeadLetters(ctx, now.Add(2*time.Minute), store.DeadLetterFilter{IDs: nil, Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.AcceptLateResult(ctx, now.Add(3*time.Minute), lr.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("accept of a requeued job's late result: %v, want ErrConflict", err)
	}
	if got := getJob(t, ex, j.ID); got.State != weirtype.StateAvailable || got.LeaseOwner != "" {
		t.Fatalf("requeued job %+v, want available and unowned", *got)
	}
	if got, err := ex.ListLateResults(ctx, store.LateResultFilter{Pending: true}); err != nil || len(got) != 1 {
		t.Fatalf("a refused accept changed the result: %v, %v", got, err)
	}
}

// testLateResultPurged: purging the dead letter of a job with a late
// result deletes the job but keeps the result, a record of what the
// attempt returned, which can then no longer be accepted.
func testLateResultPurged(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	j, lr := lateResult(t, ex, store.InsertParams{Kind: "k", Queue: "purged"})
	if n, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{}); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, err := ex.GetJob(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purged job: %v, want ErrNotFound", err)
	}
	if got, err := ex.ListLateResults(ctx, store.LateResultFilter{JobID: j.ID}); err != nil || len(got) != 1 || got[0].ID != lr.ID {
		t.Fatalf("late results after a purge: %v, %v", got, err)
	}
	if _, err := ex.AcceptLateResult(ctx, now.Add(time.Hour), lr.ID); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("accept of a purged job's result: %v, want ErrConflict saying the job no longer exists", err)
	}
	if got, err := ex.ListLateResults(ctx, store.LateResultFilter{JobID: j.ID, Pending: true}); err != nil || len(got) != 1 || got[0].ID != lr.ID {
		t.Fatalf("late results after the refused accept: %v, %v; want the pending one", got, err)
	}
}

// lateResult claims a job of p (due by now) for w1 and completes it late,
// a minute after now, and returns it and its late result.
func lateResult(t *testing.T, ex store.Executor, p store.InsertParams) (*weirtype.Job, *weirtype.LateResult) {
	t.Helper()
	p.DeadlineAt = now
	j := claimOne(t, ex, p, "w1")
	lr, _, err := ex.CompleteLate(context.Background(), now.Add(time.Minute), store.LeaseOf(j))
	if err != nil {
		t.Fatal(err)
	}
	return j, lr
}

func testListStuck(t *testing.T, h Harness) {
	s := migrated(t, h)
	ex := s.Executor()
	ctx := context.Background()
	old := now.Add(-time.Hour)
	hung := insertOne(t, ex, old, store.InsertParams{Kind: "k", Queue: "s1"}).Job
	h.SetState(t, s, hung.ID, weirtype.StateRunning, now.Add(-30*time.Minute))
	older := insertOne(t, ex, old, store.InsertParams{Kind: "k", Queue: "s1"}).Job
	h.SetState(t, s, older.ID, weirtype.StateRunning, now.Add(-40*time.Minute))
	recent := insertOne(t, ex, old, store.InsertParams{Kind: "k", Queue: "s1"}).Job
	h.SetState(t, s, recent.ID, weirtype.StateRunning, now.Add(-time.Minute))
	// Waiting jobs, however long they wait, and final ones are not listed:
	// CountJobs counts the waiting ones stuck.
	waitingRetry := insertOne(t, ex, old, store.InsertParams{Kind: "k", Queue: "s1"}).Job
	h.SetState(t, s, waitingRetry.ID, weirtype.StateScheduled, now.Add(-20*time.Minute))
	insertOne(t, ex, now.Add(-50*time.Minute), store.InsertParams{Kind: "k", Queue: "s2"})
	finished := insertOne(t, ex, old, store.InsertParams{Kind: "k", Queue: "s1"}).Job
	h.SetState(t, s, finished.ID, weirtype.StateCompleted, now.Add(-40*time.Minute))

	before := now.Add(-10 * time.Minute)
	got, err := ex.ListStuck(ctx, before, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{older.ID, hung.ID}; !slices.Equal(ids(got), want) {
		t.Fatalf("stuck %v, want %v: the running jobs, oldest attempt first", ids(got), want)
	}
	if got[1].State != weirtype.StateRunning || got[1].Attempt != 1 || got[1].LeaseOwner == "" {
		t.Fatalf("stuck job %+v", *got[1])
	}
	if one, err := ex.ListStuck(ctx, before, 1); err != nil || !slices.Equal(ids(one), []int64{older.ID}) {
		t.Fatalf("stuck with limit 1: %v, %v", ids(one), err)
	}
}

func testCountJobs(t *testing.T, h Harness) {
	s := migrated(t, h)
	ex := s.Executor()
	ctx := context.Background()
	old := now.Add(-time.Hour)
	for range 3 {
		insertOne(t, ex, now, store.InsertParams{Kind: "a", Queue: "c"})
	}
	insertOne(t, ex, old, store.InsertParams{Kind: "a", Queue: "c"})
	// A job scheduled for later is not stuck, however long ago it was made.
	insertOne(t, ex, old, store.InsertParams{Kind: "a", Queue: "c", ScheduledAt: now.Add(time.Hour)})
	hung := insertOne(t, ex, old, store.InsertParams{Kind: "b", Queue: "c"}).Job
	h.SetState(t, s, hung.ID, weirtype.StateRunning, now.Add(-30*time.Minute))
	done := insertOne(t, ex, old, store.InsertParams{Kind: "b", Queue: "c"}).Job
	h.SetState(t, s, done.ID, weirtype.StateCompleted, now.Add(-30*time.Minute))

	got, err := ex.CountJobs(ctx, now.Add(-10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y store.JobCount) int {
		if x.Kind != y.Kind {
			if x.Kind < y.Kind {
				return -1
			}
			return 1
		}
		if x.State < y.State {
			return -1
		}
		if x.State > y.State {
			return 1
		}
		return 0
	})
	want := []store.JobCount{
		{Queue: "c", Kind: "a", State: weirtype.StateAvailable, Count: 4, Stuck: 1},
		{Queue: "c", Kind: "a", State: weirtype.StateScheduled, Count: 1, Stuck: 0},
		{Queue: "c", Kind: "b", State: weirtype.StateCompleted, Count: 1, Stuck: 0},
		{Queue: "c", Kind: "b", State: weirtype.StateRunning, Count: 1, Stuck: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
}

func testRequeueAfterDeadline(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ctx := context.Background()
	j := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "rq", DeadlineAt: now.Add(time.Minute)}, "w1")
	if _, err := ex.ExpireDeadlines(ctx, now.Add(2*time.Minute), 10); err != nil {
		t.Fatal(err)
	}
	at := now.Add(time.Hour)
	got, err := ex.RequeueDeadLetters(ctx, at, store.DeadLetterFilter{Kind: "k"})
	if err != nil || !slices.Equal(got, []int64{j.ID}) {
		t.Fatalf("requeue: %v, %v", got, err)
	}
	r := getJob(t, ex, j.ID)
	last := r.Errors[len(r.Errors)-1]
	if r.State != weirtype.StateAvailable || r.Attempt != 0 || !r.DeadlineAt.IsZero() || r.LeaseOwner != "" ||
		last.Type != weirtype.ErrorTypeRequeued || last.Attempt != 0 || !last.At.Equal(at) || last.Message == "" {
		t.Fatalf("requeued job %+v, want available, no deadline, a requeued entry last", *r)
	}
	if expired, err := ex.ExpireDeadlines(ctx, at.Add(time.Hour), 10); err != nil || len(expired) != 0 {
		t.Fatalf("a requeued job expired again: %v, %v", expired, err)
	}
	// The abandoned attempt's success, coming now, is not late any more:
	// its lease is simply lost.
	if _, _, err := ex.CompleteLate(ctx, at.Add(time.Minute), store.LeaseOf(j)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late completion of the abandoned attempt after a requeue: %v, want ErrLeaseLost", err)
	}
}
