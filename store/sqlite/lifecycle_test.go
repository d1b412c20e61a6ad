package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
	"github.com/weirhq/weir/weirtype"
)

var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

const leaseFor = 30 * time.Second

// claimed inserts a job in a queue of its own and claims it as owner at t0.
func claimed(t *testing.T, ex store.Executor, p store.InsertParams, owner string) *weirtype.Job {
	t.Helper()
	ctx := context.Background()
	if p.Queue == "" {
		p.Queue = "q-" + t.Name()
	}
	if _, err := ex.Insert(ctx, t0.Add(-time.Minute), []store.InsertParams{p}); err != nil {
		t.Fatal(err)
	}
	jobs, err := ex.Claim(ctx, store.ClaimParams{Now: t0, Queue: p.Queue, Limit: 1, Owner: owner, LeaseFor: leaseFor})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	return jobs[0]
}

// TestLifecycleRefusesBadParams: every lifecycle call checks its
// parameters before it writes, and names the bad one.
func TestLifecycleRefusesBadParams(t *testing.T) {
	t.Parallel()
	ctx, _, ex := migratedExec(t)
	far := time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)
	claim := func(p store.ClaimParams) error { _, err := ex.Claim(ctx, p); return err }
	fail := func(p store.FailParams) error { _, err := ex.Fail(ctx, p); return err }
	heartbeat := func(ls []store.Lease, d time.Duration) error { _, err := ex.Heartbeat(ctx, t0, ls, d); return err }
	ok := store.Lease{ID: 1, Owner: "w", Attempt: 1}
	okClaim := store.ClaimParams{Now: t0, Limit: 1, Owner: "w", LeaseFor: leaseFor}
	okFail := store.FailParams{Now: t0, Lease: store.Lease{ID: 1, Owner: "w", Attempt: 1}, RetryAt: t0}
	checkInvalid(t, []invalidCall{
		{"claim limit 0", "limit 0", claim(store.ClaimParams{Now: t0, Owner: "w", LeaseFor: leaseFor})},
		{"claim without owner", "owner", claim(store.ClaimParams{Now: t0, Limit: 1, LeaseFor: leaseFor})},
		{"claim without lease", "lease-for", claim(store.ClaimParams{Now: t0, Limit: 1, Owner: "w"})},
		{"claim at zero time", "now", claim(store.ClaimParams{Limit: 1, Owner: "w", LeaseFor: leaseFor})},
		{"claim lease past the range", "lease expiry", claim(store.ClaimParams{Now: time.UnixMicro(1<<63 - 1), Limit: 1, Owner: "w", LeaseFor: time.Hour})},
		{"heartbeat without owner", "owner", heartbeat([]store.Lease{ok, {ID: 2, Attempt: 1}}, leaseFor)},
		{"heartbeat at attempt 0", "attempt 0", heartbeat([]store.Lease{{ID: 1, Owner: "w"}}, leaseFor)},
		{"heartbeat without lease", "lease-for", heartbeat([]store.Lease{ok}, 0)},
		{"complete without owner", "owner", func() error { _, err := ex.Complete(ctx, t0, store.Lease{ID: 1, Attempt: 1}); return err }()},
		{"complete at attempt 0", "attempt 0", func() error { _, err := ex.Complete(ctx, t0, store.Lease{ID: 1, Owner: "w"}); return err }()},
		{"complete at zero time", "now", func() error { _, err := ex.Complete(ctx, time.Time{}, ok); return err }()},
		{"fail without owner", "owner", fail(store.FailParams{Now: t0, Lease: store.Lease{ID: 1, Attempt: 1}, RetryAt: t0})},
		{"fail at a negative attempt", "attempt -1", fail(store.FailParams{Now: t0, Lease: store.Lease{ID: 1, Owner: "w", Attempt: -1}, RetryAt: t0})},
		{"fail with unknown reason", "abandon reason", fail(store.FailParams{Now: t0, Lease: ok, Abandon: "bored"})},
		{"fail with error time out of range", "error at", fail(store.FailParams{Now: t0, Lease: ok, RetryAt: t0, Error: weirtype.AttemptError{At: far}})},
		{"snooze without owner", "owner", func() error { _, err := ex.Snooze(ctx, t0, store.Lease{ID: 1, Attempt: 1}, t0); return err }()},
		{"snooze at attempt 0", "attempt 0", func() error { _, err := ex.Snooze(ctx, t0, store.Lease{ID: 1, Owner: "w"}, t0); return err }()},
		{"snooze until zero time", "until", func() error { _, err := ex.Snooze(ctx, t0, ok, time.Time{}); return err }()},
		{"cancel at zero time", "now", func() error { _, err := ex.Cancel(ctx, time.Time{}, 1); return err }()},
		{"rescue limit 0", "limit 0", func() error { _, _, err := ex.RescueExpired(ctx, t0, 0); return err }()},
		{"release without owner", "owner", func() error { _, err := ex.ReleaseOwned(ctx, t0, "", true); return err }()},
		{"list with negative limit", "limit -1", func() error { _, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{Limit: -1}); return err }()},
		{"list with unknown reason", "abandon reason", func() error {
			_, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{Reason: "bored"})
			return err
		}()},
		{"requeue at zero time", "now", func() error { _, err := ex.RequeueDeadLetters(ctx, time.Time{}, store.DeadLetterFilter{}); return err }()},
		{"purge failed before out of range", "failed before", func() error {
			_, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{FailedBefore: far})
			return err
		}()},
	})
	// The good parameters the table varies are good.
	if err := claim(okClaim); err != nil {
		t.Fatalf("claim %+v: %v", okClaim, err)
	}
	if err := fail(okFail); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("fail %+v of a missing job: %v, want ErrLeaseLost", okFail, err)
	}
}

// TestRescueRecordsTheExpiredLease: the error a rescue records names the
// worker and when its lease ended, and a job out of attempts carries it
// into its dead letter.
func TestRescueRecordsTheExpiredLease(t *testing.T) {
	t.Parallel()
	ctx, _, ex := migratedExec(t)
	j := claimed(t, ex, store.InsertParams{Kind: "k", MaxAttempts: 1}, "worker-7")
	at := t0.Add(time.Hour)
	if _, dead, err := ex.RescueExpired(ctx, at, 10); err != nil || !slices.Equal(store.IDsOf(dead), []int64{j.ID}) {
		t.Fatalf("rescue: %v, %v", dead, err)
	}
	dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters %v, %v", dls, err)
	}
	dl := dls[0]
	want := weirtype.AttemptError{Attempt: 1, At: at, Message: "lease held by worker-7 expired at 2026-01-21T15:30:30.000Z", Type: weirtype.ErrorTypeLeaseExpired}
	if dl.Attempts != 1 || dl.Reason != weirtype.AbandonMaxAttempts || dl.LastError != want.Message ||
		len(dl.Errors) != 1 || dl.Errors[0] != want || !dl.FailedAt.Equal(at) {
		t.Fatalf("dead letter %+v, want its error %+v", *dl, want)
	}
	got, err := ex.GetJob(ctx, j.ID)
	if err != nil || got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() || !got.UpdatedAt.Equal(at) || len(got.Errors) != 1 {
		t.Fatalf("dead job %+v, %v", got, err)
	}
}

// TestRescueTakesTheOldestLeasesFirst: a rescue with a limit takes the
// leases that ended first, and leaves the rest for the next round.
func TestRescueTakesTheOldestLeasesFirst(t *testing.T) {
	t.Parallel()
	ctx, _, ex := migratedExec(t)
	var want []int64
	for i := range 5 {
		if _, err := ex.Insert(ctx, t0, []store.InsertParams{{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
		// Claimed later, each lease ends later.
		jobs, err := ex.Claim(ctx, store.ClaimParams{Now: t0.Add(time.Duration(5-i) * time.Second), Limit: 1, Owner: "w", LeaseFor: leaseFor})
		if err != nil || len(jobs) != 1 {
			t.Fatal(jobs, err)
		}
		want = append(want, jobs[0].ID)
	}
	slices.Reverse(want) // oldest lease first
	// Each list comes back in ascending order of id.
	first, _, err := ex.RescueExpired(ctx, t0.Add(time.Hour), 2)
	if wantFirst := slices.Sorted(slices.Values(want[:2])); err != nil || !slices.Equal(store.IDsOf(first), wantFirst) {
		t.Fatalf("first rescue %v, %v; want %v", first, err, wantFirst)
	}
	rest, _, err := ex.RescueExpired(ctx, t0.Add(time.Hour), 10)
	if wantRest := slices.Sorted(slices.Values(want[2:])); err != nil || !slices.Equal(store.IDsOf(rest), wantRest) {
		t.Fatalf("second rescue %v, %v; want %v", rest, err, wantRest)
	}
}

// TestHeartbeatEdges: no leases is no work, a repeated lost lease is
// reported once, a lease at the wrong attempt or of another owner is lost,
// and a lease that ended but was not rescued yet is still held.
func TestHeartbeatEdges(t *testing.T) {
	t.Parallel()
	ctx, _, ex := migratedExec(t)
	if lost, err := ex.Heartbeat(ctx, t0, nil, leaseFor); err != nil || lost != nil {
		t.Fatalf("heartbeat of nothing: %v, %v", lost, err)
	}
	j := claimed(t, ex, store.InsertParams{Kind: "k"}, "w")
	other := claimed(t, ex, store.InsertParams{Kind: "k", Queue: "other"}, "w2")
	late := t0.Add(time.Hour)
	held := store.LeaseOf(j)
	missing := store.Lease{ID: 404, Owner: "w", Attempt: 1}
	nextAttempt := store.Lease{ID: j.ID, Owner: "w", Attempt: 2}
	otherOwner := store.Lease{ID: other.ID, Owner: "w", Attempt: 1}
	lost, err := ex.Heartbeat(ctx, late, []store.Lease{held, missing, held, missing, nextAttempt, otherOwner, store.LeaseOf(other)}, leaseFor)
	if want := []int64{404, j.ID, other.ID}; err != nil || !slices.Equal(lost, want) {
		t.Fatalf("lost %v, %v; want %v", lost, err, want)
	}
	for _, id := range []int64{j.ID, other.ID} {
		if got, err := ex.GetJob(ctx, id); err != nil || !got.LeaseExpiresAt.Equal(late.Add(leaseFor)) {
			t.Fatalf("lease after a late heartbeat: %+v, %v", got, err)
		}
	}
	// An owner is any string: the leases travel as JSON.
	odd := claimed(t, ex, store.InsertParams{Kind: "k", Queue: "odd"}, "host \"a\"\\pid\t7 \u00e9\u2028")
	if lost, err := ex.Heartbeat(ctx, late, []store.Lease{store.LeaseOf(odd)}, leaseFor); err != nil || lost != nil {
		t.Fatalf("heartbeat of owner %q: lost %v, %v", odd.LeaseOwner, lost, err)
	}
}

// TestDeadLetterFilterWithEmptyIDsMatchesNothing: IDs set to an empty
// slice selects no dead letter (only a nil IDs matches all), so an empty
// selection never purges everything.
func TestDeadLetterFilterWithEmptyIDsMatchesNothing(t *testing.T) {
	t.Parallel()
	ctx, _, ex := migratedExec(t)
	j := claimed(t, ex, store.InsertParams{Kind: "k"}, "w")
	if _, err := ex.Fail(ctx, store.FailParams{Now: t0, Lease: store.LeaseOf(j), Abandon: weirtype.AbandonPermanent}); err != nil {
		t.Fatal(err)
	}
	empty := store.DeadLetterFilter{IDs: []int64{}}
	if dls, err := ex.ListDeadLetters(ctx, empty); err != nil || len(dls) != 0 {
		t.Fatalf("list: %v, %v", dls, err)
	}
	if ids, err := ex.RequeueDeadLetters(ctx, t0, empty); err != nil || len(ids) != 0 {
		t.Fatalf("requeue: %v, %v", ids, err)
	}
	if n, err := ex.PurgeDeadLetters(ctx, empty); err != nil || n != 0 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{}); err != nil || len(dls) != 1 {
		t.Fatalf("dead letters left: %v, %v; want 1", dls, err)
	}
}

// TestLifecycleInCallersTransaction: the lifecycle runs in a caller's
// transaction and rolls back with it; and a call that fails inside it
// undoes its own writes only, so a caller that commits anyway never
// commits a dead job without its dead letter.
func TestLifecycleInCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx, s, ex := migratedExec(t)
	j := claimed(t, ex, store.InsertParams{Kind: "k"}, "w")

	inRolledBackTx(t, s, func(_ *sql.Tx, ex store.Executor) {
		if _, err := ex.Complete(ctx, t0, store.LeaseOf(j)); err != nil {
			t.Fatal(err)
		}
		if got, err := ex.GetJob(ctx, j.ID); err != nil || got.State != weirtype.StateCompleted {
			t.Fatalf("in the transaction: %+v, %v", got, err)
		}
	})
	if got := mustGet(t, s, j.ID); got.State != weirtype.StateRunning || got.LeaseOwner != "w" {
		t.Fatalf("after rollback: %+v", *got)
	}

	inRolledBackTx(t, s, func(tx *sql.Tx, ex store.Executor) {
		if _, err := tx.ExecContext(ctx, "CREATE TABLE app_notes (note TEXT)"); err != nil {
			t.Fatal(err)
		}
		// The dead letter's write fails after the job's update succeeded.
		if _, err := tx.ExecContext(ctx, "DROP TABLE weir_dead_letters"); err != nil {
			t.Fatal(err)
		}
		_, err := ex.Fail(ctx, store.FailParams{Now: t0, Lease: store.LeaseOf(j), Abandon: weirtype.AbandonPermanent})
		if err == nil || !strings.Contains(err.Error(), "dead letter") {
			t.Fatalf("fail without a dead-letter table: %v", err)
		}
		if got, err := ex.GetJob(ctx, j.ID); err != nil || got.State != weirtype.StateRunning || len(got.Errors) != 0 {
			t.Fatalf("after the failed call, in the transaction: %+v, %v", got, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO app_notes VALUES ('kept')"); err != nil {
			t.Fatalf("the caller's transaction after the failed call: %v", err)
		}
	})
}

// TestDeadlineExpiryNamesTheDeadline: the error an expiry records names
// the deadline as time.RFC3339Nano writes it, and the job's dead letter
// carries it.
func TestDeadlineExpiryNamesTheDeadline(t *testing.T) {
	t.Parallel()
	ctx, s, ex := migratedExec(t)
	whole := claimed(t, ex, store.InsertParams{Kind: "k", Queue: "whole", DeadlineAt: t0.Add(20 * time.Minute)}, "w")
	res, err := ex.Insert(ctx, t0, []store.InsertParams{
		{Kind: "k", Queue: "frac", DeadlineAt: t0.Add(25*time.Minute + 1500*time.Microsecond)},
		{Kind: "k", Queue: "frac", DeadlineAt: time.Date(1969, 12, 31, 23, 59, 59, 250000000, time.UTC)},
	})
	if err != nil {
		t.Fatal(err)
	}
	frac, ancient := res[0].Job, res[1].Job
	at := t0.Add(time.Hour)
	if ids, err := ex.ExpireDeadlines(ctx, at, 10); err != nil || !slices.Equal(store.IDsOf(ids), []int64{ancient.ID, whole.ID, frac.ID}) {
		t.Fatalf("expire: %v, %v", ids, err)
	}
	want := map[int64]weirtype.AttemptError{}
	for _, c := range []struct {
		id      int64
		attempt int
		owner   string
		msg     string
	}{
		{whole.ID, 1, "w", "deadline 2026-01-21T15:50:00Z passed before the job completed"},
		{frac.ID, 0, "", "deadline 2026-01-21T15:55:00.0015Z passed before the job completed"},
		{ancient.ID, 0, "", "deadline 1969-12-31T23:59:59.25Z passed before the job completed"},
	} {
		want[c.id] = weirtype.AttemptError{Attempt: c.attempt, At: at, Message: c.msg, Type: weirtype.ErrorTypeDeadlineExceeded}
		j := mustGet(t, s, c.id)
		if len(j.Errors) != 1 || j.Errors[0] != want[c.id] || j.LeaseOwner != c.owner || !j.UpdatedAt.Equal(at) {
			t.Fatalf("expired job %+v, want its error %+v and owner %q", *j, want[c.id], c.owner)
		}
	}
	dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
	if err != nil || len(dls) != len(want) {
		t.Fatalf("dead letters %v, %v", dls, err)
	}
	for _, dl := range dls {
		if dl.Reason != weirtype.AbandonDeadline || dl.LastError != want[dl.JobID].Message || !slices.Equal(dl.Errors, []weirtype.AttemptError{want[dl.JobID]}) {
			t.Fatalf("dead letter %+v, want its job's error %+v", *dl, want[dl.JobID])
		}
	}
}

// TestCompleteLateInCallersTransaction: a late completion in a caller's
// transaction rolls back with it: the job stays running, with no dead
// letter and no late result.
func TestCompleteLateInCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx, s, ex := migratedExec(t)
	j := claimed(t, ex, store.InsertParams{Kind: "k", DeadlineAt: t0}, "w")
	inRolledBackTx(t, s, func(_ *sql.Tx, ex store.Executor) {
		if _, _, err := ex.CompleteLate(ctx, t0.Add(time.Minute), store.LeaseOf(j)); err != nil {
			t.Fatal(err)
		}
	})
	if got := mustGet(t, s, j.ID); got.State != weirtype.StateRunning || len(got.Errors) != 0 {
		t.Fatalf("after rollback: %+v", *got)
	}
	if dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{}); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters after rollback: %v, %v", dls, err)
	}
	if lrs, err := ex.ListLateResults(ctx, store.LateResultFilter{}); err != nil || len(lrs) != 0 {
		t.Fatalf("late results after rollback: %v, %v", lrs, err)
	}
}

// TestDeadlineCallsRefuseBadParams: each call names its bad parameter.
func TestDeadlineCallsRefuseBadParams(t *testing.T) {
	t.Parallel()
	ctx, _, ex := migratedExec(t)
	checkInvalid(t, []invalidCall{
		{"expire limit 0", "limit 0", func() error { _, err := ex.ExpireDeadlines(ctx, t0, 0); return err }()},
		{"expire at zero time", "now", func() error { _, err := ex.ExpireDeadlines(ctx, time.Time{}, 1); return err }()},
		{"list late with negative limit", "limit -1", func() error {
			_, err := ex.ListLateResults(ctx, store.LateResultFilter{Limit: -1})
			return err
		}()},
		{"accept at zero time", "now", func() error { _, err := ex.AcceptLateResult(ctx, time.Time{}, 1); return err }()},
		{"stuck limit 0", "limit 0", func() error { _, err := ex.ListStuck(ctx, t0, 0); return err }()},
		{"stuck before zero time", "before", func() error { _, err := ex.ListStuck(ctx, time.Time{}, 1); return err }()},
		{"count before zero time", "before", func() error { _, err := ex.CountJobs(ctx, time.Time{}); return err }()},
	})
}

func mustGet(t *testing.T, s *sqlite.Store, id int64) *weirtype.Job {
	t.Helper()
	j, err := s.Executor().GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// BenchmarkClaimComplete measures the worker's hot path on a file: claim
// ten jobs, complete each. One op is one job claimed and completed.
func BenchmarkClaimComplete(b *testing.B) {
	ctx, _, ex := migratedExec(b)
	batch := make([]store.InsertParams, 1000)
	for i := range batch {
		batch[i] = store.InsertParams{Kind: "k", Payload: []byte(`{"path":"incoming/doc.txt"}`)}
	}
	for n := b.N; n > 0; n -= len(batch) {
		if _, err := ex.Insert(ctx, t0, batch[:min(n, len(batch))]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		jobs, err := ex.Claim(ctx, store.ClaimParams{Now: t0, Limit: 10, Owner: "bench", LeaseFor: leaseFor})
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) == 0 {
			b.Fatalf("claimed nothing after %d of %d jobs", done, b.N)
		}
		for _, j := range jobs {
			if _, err := ex.Complete(ctx, t0, store.LeaseOf(j)); err != nil {
				b.Fatal(err)
			}
		}
		done += len(jobs)
	}
}
