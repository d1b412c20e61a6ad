package postgres_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// The error an expiry records, written by the database, names the
// deadline in RFC 3339 and reads back as weir would have written it.
func TestExpireRecordsTheDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	ex := s.Executor()
	j := insert(t, ex, store.InsertParams{Kind: "k", Queue: "a", DeadlineAt: now.Add(20*time.Minute + 500*time.Millisecond)}).Job
	claimAt(t, ex, now, "a", "w1", 1, time.Hour)
	at := now.Add(time.Hour + 250*time.Microsecond)
	if ids, err := ex.ExpireDeadlines(ctx, at, 10); err != nil || !slices.Equal(store.IDsOf(ids), []int64{j.ID}) {
		t.Fatalf("expire: %v, %v", ids, err)
	}
	want := weirtype.AttemptError{Attempt: 1, At: at, Message: "deadline 2026-01-21T15:50:00.5Z passed before the job completed", Type: weirtype.ErrorTypeDeadlineExceeded}
	got, err := ex.GetJob(ctx, j.ID)
	if err != nil || len(got.Errors) != 1 || got.Errors[0] != want {
		t.Fatalf("expired job's errors %+v, %v; want [%+v]", got.Errors, err, want)
	}
	if got.LeaseOwner != "w1" || !got.LeaseExpiresAt.IsZero() || !got.UpdatedAt.Equal(at) {
		t.Fatalf("expired job %+v", *got)
	}
	dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	if dl := dls[0]; dl.JobID != j.ID || dl.Attempts != 1 || dl.LastError != want.Message || dl.Reason != weirtype.AbandonDeadline ||
		len(dl.Errors) != 1 || dl.Errors[0] != want {
		t.Fatalf("dead letter %+v", *dl)
	}
}

// Sweeps that run at once never abandon one job twice: each job past its
// deadline is expired once, with one error and one dead letter.
func TestConcurrentExpireHandlesEachJobOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	const jobs, sweeps = 120, 4
	batch := make([]store.InsertParams, jobs)
	for i := range batch {
		batch[i] = store.InsertParams{Kind: "k", DeadlineAt: now.Add(time.Duration(i%7) * time.Second)}
	}
	if _, err := s.Executor().Insert(ctx, now, batch); err != nil {
		t.Fatal(err)
	}
	sweepEachOnce(t, "expire", sweeps, jobs, func() ([]int64, error) {
		refs, err := s.Executor().ExpireDeadlines(ctx, now.Add(time.Minute), 7)
		return store.IDsOf(refs), err
	})
	wantCount(t, s, "SELECT count(*) FROM weir_dead_letters", jobs)
	wantCount(t, s, "SELECT count(*) FROM weir_jobs WHERE jsonb_array_length(errors) <> 1", 0)
}

// A late completion of a job without a deadline, or of a held lease whose
// deadline has not passed, is a caller's mistake, and changes nothing.
func TestCompleteLateRefusesWhatIsNotLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	ex := s.Executor()
	none := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "none"})
	early := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "early", DeadlineAt: now.Add(time.Hour)})
	for _, c := range []struct {
		name string
		l    store.Lease
	}{
		{"no deadline", store.LeaseOf(none)},
		{"deadline not passed", store.LeaseOf(early)},
		{"no owner", store.Lease{ID: early.ID, Attempt: 1}},
	} {
		if _, _, err := ex.CompleteLate(ctx, now.Add(time.Hour), c.l); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	for _, j := range []*weirtype.Job{none, early} {
		if got, err := ex.GetJob(ctx, j.ID); err != nil || got.State != weirtype.StateRunning || len(got.Errors) != 0 {
			t.Fatalf("job after a refused late completion: %+v, %v", got, err)
		}
	}
}

// Workers that report one late attempt at once store one result.
func TestConcurrentCompleteLateStoresOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	ex := s.Executor()
	j := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "late", DeadlineAt: now})
	const n = 8
	var wg sync.WaitGroup
	ids := make([]int64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			lr, _, err := s.Executor().CompleteLate(ctx, now.Add(time.Minute), store.LeaseOf(j))
			errs[i] = err
			if err == nil {
				ids[i] = lr.ID
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("late completion %d: result %d, %v; want result %d", i, ids[i], errs[i], ids[0])
		}
	}
	wantCount(t, s, "SELECT count(*) FROM weir_late_results", 1)
	wantCount(t, s, "SELECT count(*) FROM weir_dead_letters", 1)
}

// A purge deletes a dead job but keeps its late result, a record of what
// the attempt returned, which can then no longer be accepted.
func TestPurgeKeepsLateResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	ex := s.Executor()
	j := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "purged", DeadlineAt: now})
	lr, _, err := ex.CompleteLate(ctx, now.Add(time.Minute), store.LeaseOf(j))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{}); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, err := ex.GetJob(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purged job: %v, want ErrNotFound", err)
	}
	got, err := ex.ListLateResults(ctx, store.LateResultFilter{JobID: j.ID})
	if err != nil || len(got) != 1 || got[0].ID != lr.ID {
		t.Fatalf("late results after a purge: %v, %v", got, err)
	}
	if _, err := ex.AcceptLateResult(ctx, now.Add(time.Hour), lr.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("accept of a purged job's result: %v, want ErrConflict", err)
	}
}

func claimOne(t *testing.T, ex store.Executor, p store.InsertParams) *weirtype.Job {
	t.Helper()
	insert(t, ex, p)
	jobs := claimAt(t, ex, now, p.Queue, "w1", 1, time.Hour)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs of %s, want 1", len(jobs), p.Queue)
	}
	return jobs[0]
}
