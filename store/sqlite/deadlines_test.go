package sqlite_test

import (
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

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

// TestCompleteLateRefusesAnAttemptThatIsNotLate: a job without a deadline
// cannot be late, nor can a held attempt whose deadline has not passed
// (it is Completed instead); both are refused as invalid, changing
// nothing.
func TestCompleteLateRefusesAnAttemptThatIsNotLate(t *testing.T) {
	t.Parallel()
	ctx, s, ex := migratedExec(t)
	none := claimed(t, ex, store.InsertParams{Kind: "k", Queue: "none"}, "w")
	onTime := claimed(t, ex, store.InsertParams{Kind: "k", Queue: "on-time", DeadlineAt: t0.Add(time.Minute)}, "w")
	completeLate := func(at time.Time, l store.Lease) error { _, _, err := ex.CompleteLate(ctx, at, l); return err }
	checkInvalid(t, []invalidCall{
		{"no deadline", "has no deadline", completeLate(t0.Add(time.Hour), store.LeaseOf(none))},
		{"deadline not passed", "has not passed", completeLate(t0.Add(time.Minute), store.LeaseOf(onTime))},
		{"no owner", "owner", completeLate(t0.Add(time.Hour), store.Lease{ID: onTime.ID, Attempt: 1})},
		{"zero time", "now", completeLate(time.Time{}, store.LeaseOf(onTime))},
	})
	for _, id := range []int64{none.ID, onTime.ID} {
		if j := mustGet(t, s, id); j.State != weirtype.StateRunning || len(j.Errors) != 0 {
			t.Fatalf("a refused late completion changed job %d: %+v", id, *j)
		}
	}
	if lrs, err := ex.ListLateResults(ctx, store.LateResultFilter{}); err != nil || len(lrs) != 0 {
		t.Fatalf("late results %v, %v; want none", lrs, err)
	}
}

// TestLateResultOutlivesAPurge: purging the dead letter of a job with a
// late result deletes the job but keeps the result, an audit record;
// accepting it then is a conflict.
func TestLateResultOutlivesAPurge(t *testing.T) {
	t.Parallel()
	ctx, _, ex := migratedExec(t)
	j := claimed(t, ex, store.InsertParams{Kind: "k", DeadlineAt: t0}, "w")
	lr, _, err := ex.CompleteLate(ctx, t0.Add(time.Minute), store.LeaseOf(j))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{}); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, err := ex.GetJob(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purged job: %v, want ErrNotFound", err)
	}
	if _, err := ex.AcceptLateResult(ctx, t0.Add(time.Hour), lr.ID); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("accept of a purged job's result: %v, want ErrConflict", err)
	}
	if lrs, err := ex.ListLateResults(ctx, store.LateResultFilter{JobID: j.ID, Pending: true}); err != nil || len(lrs) != 1 || lrs[0].ID != lr.ID {
		t.Fatalf("late results after the purge: %v, %v; want the pending one", lrs, err)
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
