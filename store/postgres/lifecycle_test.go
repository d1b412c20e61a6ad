package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/weirtype"
)

func claimAt(t *testing.T, ex store.Executor, at time.Time, queue, owner string, limit int, leaseFor time.Duration) []*weirtype.Job {
	t.Helper()
	jobs, err := ex.Claim(context.Background(), store.ClaimParams{Now: at, Queue: queue, Limit: limit, Owner: owner, LeaseFor: leaseFor})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return jobs
}

// The error a rescue records, written by the database, reads as weir
// writes errors: the lease's owner and end in RFC 3339, the time in the
// form encoding/json gives it, so that it compares equal field by field.
func TestRescueRecordsTheExpiredLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex := migratedExecutor(t)
	retry := insert(t, ex, store.InsertParams{Kind: "k", Queue: "a", MaxAttempts: 2}).Job
	spent := insert(t, ex, store.InsertParams{Kind: "extract", Queue: "b", MaxAttempts: 1, Source: "in/x.txt", IdempotencyKey: "x"}).Job
	claimAt(t, ex, now, "a", "w1", 1, 1500*time.Millisecond)
	claimAt(t, ex, now, "b", "w2", 1, time.Minute+250*time.Microsecond)

	at := now.Add(time.Hour + 123456*time.Microsecond)
	rescued, dead, err := ex.RescueExpired(ctx, at, 10)
	if err != nil || !slices.Equal(store.IDsOf(rescued), []int64{retry.ID}) || !slices.Equal(store.IDsOf(dead), []int64{spent.ID}) {
		t.Fatalf("rescue: %v %v %v", rescued, dead, err)
	}
	want := weirtype.AttemptError{Attempt: 1, At: at, Message: "lease held by w1 expired at 2026-01-21T15:30:01.5Z", Type: weirtype.ErrorTypeLeaseExpired}
	got := jobWithError(t, ex, retry.ID, want)
	if got.State != weirtype.StateAvailable || !got.ScheduledAt.Equal(at) || !got.UpdatedAt.Equal(at) || !got.LeaseExpiresAt.IsZero() {
		t.Fatalf("rescued job %+v", *got)
	}

	wantDead := weirtype.AttemptError{Attempt: 1, At: at, Message: "lease held by w2 expired at 2026-01-21T15:31:00.00025Z", Type: weirtype.ErrorTypeLeaseExpired}
	dl := onlyDeadLetter(t, ex)
	if dl.JobID != spent.ID || dl.Kind != "extract" || dl.Queue != "b" || dl.Source != "in/x.txt" || dl.IdempotencyKey != "x" ||
		dl.Attempts != 1 || dl.LastError != wantDead.Message || dl.ErrorType != weirtype.ErrorTypeLeaseExpired ||
		dl.Reason != weirtype.AbandonMaxAttempts || len(dl.Errors) != 1 || dl.Errors[0] != wantDead ||
		!dl.JobCreatedAt.Equal(now) || !dl.FailedAt.Equal(at) {
		t.Fatalf("dead letter %+v", *dl)
	}
}

// Sweeps that run at once never handle one job twice: each expired lease
// is rescued once, with one error recorded, and each job past its
// deadline expired once, with one error and one dead letter.
func TestConcurrentSweepsHandleEachJobOnce(t *testing.T) {
	t.Parallel()
	const jobs, sweepers = 120, 4
	ctx := context.Background()
	for _, c := range []struct {
		name        string
		job         func(i int) store.InsertParams
		claimed     bool // the jobs are claimed, on a lease of a second, before the sweeps
		sweep       func(ex store.Executor) ([]int64, error)
		deadLetters int
	}{
		{"rescue", func(i int) store.InsertParams { return store.InsertParams{Kind: "k", MaxAttempts: 1 + i%2} }, true,
			func(ex store.Executor) ([]int64, error) {
				rescued, dead, err := ex.RescueExpired(ctx, now.Add(time.Minute), 7)
				return store.IDsOf(append(rescued, dead...)), err
			}, jobs / 2},
		{"expire", func(i int) store.InsertParams {
			return store.InsertParams{Kind: "k", DeadlineAt: now.Add(time.Duration(i%7) * time.Second)}
		}, false,
			func(ex store.Executor) ([]int64, error) {
				refs, err := ex.ExpireDeadlines(ctx, now.Add(time.Minute), 7)
				return store.IDsOf(refs), err
			}, jobs},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := migrated(t)
			insertBatch(t, s.Executor(), jobs, c.job)
			if c.claimed {
				if got := claimAt(t, s.Executor(), now, store.DefaultQueue, "w", jobs, time.Second); len(got) != jobs {
					t.Fatalf("claimed %d jobs, want %d", len(got), jobs)
				}
			}
			sweepEachOnce(t, c.name, sweepers, jobs, func() ([]int64, error) { return c.sweep(s.Executor()) })
			wantCount(t, s, "SELECT count(*) FROM weir_jobs WHERE jsonb_array_length(errors) <> 1", 0)
			wantCount(t, s, "SELECT count(*) FROM weir_dead_letters", c.deadLetters)
		})
	}
}

// jobWithError returns job id, failing the test unless want is its one
// recorded error.
func jobWithError(t *testing.T, ex store.Executor, id int64, want weirtype.AttemptError) *weirtype.Job {
	t.Helper()
	got, err := ex.GetJob(context.Background(), id)
	if err != nil || len(got.Errors) != 1 || got.Errors[0] != want {
		t.Fatalf("job %d's errors %+v, %v; want [%+v]", id, got.Errors, err, want)
	}
	return got
}

// onlyDeadLetter returns the one dead letter of ex's store, failing the
// test if there is none or more than one.
func onlyDeadLetter(t *testing.T, ex store.Executor) *weirtype.DeadLetter {
	t.Helper()
	dls, err := ex.ListDeadLetters(context.Background(), store.DeadLetterFilter{})
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	return dls[0]
}

// sweepEachOnce runs sweep on sweepers goroutines at once, each until it
// fails or sweeps no more jobs (it returns the ids of those it swept), and fails the test unless every one of the
// jobs was swept exactly once. what names the sweep in messages.
func sweepEachOnce(t *testing.T, what string, sweepers, jobs int, sweep func() (ids []int64, err error)) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		errs []error
		wg   sync.WaitGroup
	)
	for range sweepers {
		wg.Go(func() {
			for {
				swept, err := sweep()
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, id := range swept {
					seen[id]++
				}
				mu.Unlock()
				if err != nil || len(swept) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d sweeps (%s) failed, first: %v", len(errs), what, errs[0])
	}
	if len(seen) != jobs {
		t.Fatalf("%d jobs swept (%s), want %d", len(seen), what, jobs)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %d swept (%s) %d times", id, what, n)
		}
	}
}

// The error an expiry records, written by the database, names the
// deadline in RFC 3339 and reads back as weir would have written it.
func TestExpireRecordsTheDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex := migratedExecutor(t)
	j := insert(t, ex, store.InsertParams{Kind: "k", Queue: "a", DeadlineAt: now.Add(20*time.Minute + 500*time.Millisecond)}).Job
	claimAt(t, ex, now, "a", "w1", 1, time.Hour)
	at := now.Add(time.Hour + 250*time.Microsecond)
	if ids, err := ex.ExpireDeadlines(ctx, at, 10); err != nil || !slices.Equal(store.IDsOf(ids), []int64{j.ID}) {
		t.Fatalf("expire: %v, %v", ids, err)
	}
	want := weirtype.AttemptError{Attempt: 1, At: at, Message: "deadline 2026-01-21T15:50:00.5Z passed before the job completed", Type: weirtype.ErrorTypeDeadlineExceeded}
	got := jobWithError(t, ex, j.ID, want)
	if got.LeaseOwner != "w1" || !got.LeaseExpiresAt.IsZero() || !got.UpdatedAt.Equal(at) {
		t.Fatalf("expired job %+v", *got)
	}
	if dl := onlyDeadLetter(t, ex); dl.JobID != j.ID || dl.Attempts != 1 || dl.LastError != want.Message || dl.Reason != weirtype.AbandonDeadline ||
		len(dl.Errors) != 1 || dl.Errors[0] != want {
		t.Fatalf("dead letter %+v", *dl)
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

func claimOne(t *testing.T, ex store.Executor, p store.InsertParams) *weirtype.Job {
	t.Helper()
	insert(t, ex, p)
	jobs := claimAt(t, ex, now, p.Queue, "w1", 1, time.Hour)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs of %s, want 1", len(jobs), p.Queue)
	}
	return jobs[0]
}

// A worker's error text is arbitrary: a NUL byte or invalid UTF-8, which
// PostgreSQL cannot store, must not keep the failure from being recorded.
func TestFailRecordsTextPostgresCannotStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	ex := s.Executor()
	for i, abandon := range []weirtype.AbandonReason{"", weirtype.AbandonPermanent} {
		queue := fmt.Sprint("q", i)
		insert(t, ex, store.InsertParams{Kind: "k", Queue: queue})
		j := claimAt(t, ex, now, queue, "w", 1, time.Minute)[0]
		got, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(j), RetryAt: now, Abandon: abandon,
			Error: weirtype.AttemptError{Attempt: 1, At: now, Message: "bad\x00byte \xff", Type: "*T\x00"}})
		if err != nil {
			t.Fatalf("fail (abandon %q): %v", abandon, err)
		}
		want := weirtype.AttemptError{Attempt: 1, At: now, Message: "bad\uFFFDbyte \uFFFD", Type: "*T\uFFFD"}
		if len(got.Errors) != 1 || got.Errors[0] != want {
			t.Fatalf("errors %+v, want [%+v]", got.Errors, want)
		}
	}
	if dl := onlyDeadLetter(t, ex); dl.LastError != "bad\uFFFDbyte \uFFFD" || dl.ErrorType != "*T\uFFFD" {
		t.Fatalf("dead letter %+v", *dl)
	}
}

// The lifecycle runs in a caller's transaction, whose search_path need not
// name weir's schema, and commits or rolls back with it.
func TestLifecycleInCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	j := insert(t, s.Executor(), store.InsertParams{Kind: "k", MaxAttempts: 1}).Job

	// Claimed, lost, rescued to a dead letter, listed: then rolled back.
	inCallersTx(t, s, false, func(ex store.Executor) {
		if got := claimAt(t, ex, now, store.DefaultQueue, "w", 1, time.Second); len(got) != 1 {
			t.Fatalf("claimed %d jobs", len(got))
		}
		if _, dead, err := ex.RescueExpired(ctx, now.Add(time.Minute), 10); err != nil || !slices.Equal(store.IDsOf(dead), []int64{j.ID}) {
			t.Fatalf("rescue in the transaction: %v, %v", dead, err)
		}
		onlyDeadLetter(t, ex)
	})
	if got, err := s.Executor().GetJob(ctx, j.ID); err != nil || got.State != weirtype.StateAvailable || got.Attempt != 0 || len(got.Errors) != 0 {
		t.Fatalf("after rollback: %+v, %v", got, err)
	}
	wantCount(t, s, "SELECT count(*) FROM weir_dead_letters", 0)
	// Committed: claimed, rescued to a dead letter, requeued, claimed
	// again, abandoned, purged.
	later := now.Add(time.Hour)
	inCallersTx(t, s, true, func(ex store.Executor) {
		claimed := claimAt(t, ex, now, store.DefaultQueue, "w", 1, time.Second)
		if lost, err := ex.Heartbeat(ctx, now, []store.Lease{store.LeaseOf(claimed[0])}, time.Second); err != nil || len(lost) != 0 {
			t.Fatalf("heartbeat: %v, %v", lost, err)
		}
		if _, _, err := ex.RescueExpired(ctx, now.Add(time.Minute), 10); err != nil {
			t.Fatal(err)
		}
		if ids, err := ex.RequeueDeadLetters(ctx, later, store.DeadLetterFilter{}); err != nil || !slices.Equal(ids, []int64{j.ID}) {
			t.Fatalf("requeue: %v, %v", ids, err)
		}
		again := claimAt(t, ex, later, store.DefaultQueue, "w", 1, time.Second)
		if _, err := ex.Fail(ctx, store.FailParams{Now: later, Lease: store.LeaseOf(again[0]), Error: weirtype.AttemptError{Attempt: 1, At: later, Message: "x"}, Abandon: weirtype.AbandonTTL}); err != nil {
			t.Fatal(err)
		}
		if n, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{Reason: weirtype.AbandonTTL}); err != nil || n != 1 {
			t.Fatalf("purge: %d, %v", n, err)
		}
	})
	if _, err := s.Executor().GetJob(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the purged job after commit: %v", err)
	}
}

// One heartbeat statement takes leases of any owners and attempts: it
// extends exactly those still held, and reports each other job once, in the
// order given, however often it is named.
func TestHeartbeatMatchesEachLeaseWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	ex := s.Executor()
	insert(t, ex, store.InsertParams{Kind: "k", Queue: "a"})
	insert(t, ex, store.InsertParams{Kind: "k", Queue: "b"})
	a := claimAt(t, ex, now, "a", "w1", 1, time.Second)[0]
	b := claimAt(t, ex, now, "b", "w2", 1, time.Second)[0]
	la, lb := store.LeaseOf(a), store.LeaseOf(b)
	at := now.Add(500 * time.Millisecond)
	lost, err := ex.Heartbeat(ctx, at, []store.Lease{
		{ID: b.ID, Owner: "w2", Attempt: 2}, // a later attempt than b's
		la,
		{ID: a.ID, Owner: "w2", Attempt: 1}, // a held by w1
		lb, la,                              // named twice
		{ID: b.ID, Owner: "w2", Attempt: 1 << 40}, // beyond integer
		{ID: 999999, Owner: "w1", Attempt: 1},
	}, time.Minute)
	if err != nil || !slices.Equal(lost, []int64{b.ID, a.ID, 999999}) {
		t.Fatalf("heartbeat: lost %v, %v; want [%d %d 999999]", lost, err, b.ID, a.ID)
	}
	for _, j := range []*weirtype.Job{a, b} {
		got, err := ex.GetJob(ctx, j.ID)
		if err != nil || !got.LeaseExpiresAt.Equal(at.Add(time.Minute)) || !got.UpdatedAt.Equal(at) {
			t.Fatalf("job %d after the heartbeat: %+v, %v", j.ID, got, err)
		}
	}
	// The rescued and reclaimed job's stale lease is lost, and the error
	// says who holds the job now, at which attempt.
	later := at.Add(2 * time.Minute)
	if rescued, _, err := ex.RescueExpired(ctx, later, 10); err != nil || len(rescued) != 2 {
		t.Fatalf("rescue: %v, %v", rescued, err)
	}
	claimAt(t, ex, later, "a", "w1", 1, time.Minute)
	_, err = ex.Complete(ctx, later, la)
	if want := "held by w1 at attempt 2"; !errors.Is(err, store.ErrLeaseLost) || !strings.Contains(err.Error(), want) {
		t.Fatalf("complete of the stale attempt: %v; want ErrLeaseLost, %q", err, want)
	}
	if lost, err := ex.Heartbeat(ctx, later, []store.Lease{la, lb}, time.Minute); err != nil || !slices.Equal(lost, []int64{a.ID, b.ID}) {
		t.Fatalf("heartbeat of the stale leases: lost %v, %v", lost, err)
	}
}

// Bad parameters are refused, naming the field, before anything is
// written.
func TestLifecycleRefusesBadParams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex := migrated(t).Executor()
	ok := store.ClaimParams{Now: now, Limit: 1, Owner: "w", LeaseFor: time.Second}
	calls := map[string]func() error{
		"claim lease 0": func() error { p := ok; p.LeaseFor = 0; _, err := ex.Claim(ctx, p); return err },
		"claim no now":  func() error { p := ok; p.Now = time.Time{}; _, err := ex.Claim(ctx, p); return err },
		"heartbeat no owner": func() error {
			_, err := ex.Heartbeat(ctx, now, []store.Lease{{ID: 1, Owner: "w", Attempt: 1}, {ID: 2, Attempt: 1}}, time.Second)
			return err
		},
		"heartbeat attempt 0": func() error {
			_, err := ex.Heartbeat(ctx, now, []store.Lease{{ID: 1, Owner: "w"}}, time.Second)
			return err
		},
		"heartbeat lease 0": func() error {
			_, err := ex.Heartbeat(ctx, now, []store.Lease{{ID: 1, Owner: "w", Attempt: 1}}, 0)
			return err
		},
		"complete no owner":  func() error { _, err := ex.Complete(ctx, now, store.Lease{ID: 1, Attempt: 1}); return err },
		"complete attempt 0": func() error { _, err := ex.Complete(ctx, now, store.Lease{ID: 1, Owner: "w"}); return err },
		"complete attempt -1": func() error {
			_, err := ex.Complete(ctx, now, store.Lease{ID: 1, Owner: "w", Attempt: -1})
			return err
		},
		"fail unknown reason": func() error {
			_, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.Lease{ID: 1, Owner: "w", Attempt: 1}, Abandon: "bored"})
			return err
		},
		"fail attempt 0": func() error {
			_, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.Lease{ID: 1, Owner: "w"}})
			return err
		},
		"snooze no until": func() error {
			_, err := ex.Snooze(ctx, now, store.Lease{ID: 1, Owner: "w", Attempt: 1}, time.Time{})
			return err
		},
		"snooze no owner": func() error {
			_, err := ex.Snooze(ctx, now, store.Lease{ID: 1, Attempt: 1}, now.Add(time.Minute))
			return err
		},
		"cancel no now":        func() error { _, err := ex.Cancel(ctx, time.Time{}, 1); return err },
		"rescue limit 0":       func() error { _, _, err := ex.RescueExpired(ctx, now, 0); return err },
		"release no owner":     func() error { _, err := ex.ReleaseOwned(ctx, now, "", true); return err },
		"list negative limit":  func() error { _, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{Limit: -1}); return err },
		"list unknown reason":  func() error { _, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{Reason: "bored"}); return err },
		"requeue no now":       func() error { _, err := ex.RequeueDeadLetters(ctx, time.Time{}, store.DeadLetterFilter{}); return err },
		"purge unknown reason": func() error { _, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{Reason: "bored"}); return err },
		"owner with a NUL": func() error {
			_, err := ex.Complete(ctx, now, store.Lease{ID: 1, Owner: "w\x00", Attempt: 1})
			return err
		},
		"heartbeat owner with a NUL": func() error {
			_, err := ex.Heartbeat(ctx, now, []store.Lease{{ID: 1, Owner: "w\x00", Attempt: 1}}, time.Second)
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// failed_at keeps whole microseconds; a bound between two of them still
// splits exactly: before is strictly earlier, after is at or later.
func TestDeadLetterTimeBoundsAreExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	ex := s.Executor()
	insert(t, ex, store.InsertParams{Kind: "k"})
	j := claimAt(t, ex, now, store.DefaultQueue, "w", 1, time.Second)[0]
	if _, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(j), Abandon: weirtype.AbandonPermanent}); err != nil {
		t.Fatal(err)
	}
	count := func(f store.DeadLetterFilter) int {
		dls, err := ex.ListDeadLetters(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return len(dls)
	}
	for _, c := range []struct {
		name string
		f    store.DeadLetterFilter
		want int
	}{
		{"before failed_at", store.DeadLetterFilter{FailedBefore: now}, 0},
		{"before failed_at+1ns", store.DeadLetterFilter{FailedBefore: now.Add(time.Nanosecond)}, 1},
		{"after failed_at", store.DeadLetterFilter{FailedAfter: now}, 1},
		{"after failed_at+1ns", store.DeadLetterFilter{FailedAfter: now.Add(time.Nanosecond)}, 0},
		{"after failed_at-1ns", store.DeadLetterFilter{FailedAfter: now.Add(-time.Nanosecond)}, 1},
	} {
		if got := count(c.f); got != c.want {
			t.Errorf("%s: %d dead letters, want %d", c.name, got, c.want)
		}
	}
}

// BenchmarkClaimComplete is a worker's hot path: claim 10 jobs, complete
// each, with 100 attempts running meanwhile (the 10 oldest are completed
// after each claim). Jobs are inserted, 1000 at a time, with the timer
// stopped. The sub-benchmarks run it without a limit, and under a
// MaxRunning and a Rate that never bind, to show what counting them in
// the claim costs.
func BenchmarkClaimComplete(b *testing.B) {
	for _, c := range []struct {
		name  string
		limit *store.LimitParams
	}{
		{"unlimited", nil},
		{"max-running", &store.LimitParams{Key: "k", Kinds: []string{"k"}, MaxRunning: 1000}},
		{"rate", &store.LimitParams{Key: "k", Kinds: []string{"k"}, Rate: 1 << 30, Per: time.Second}},
	} {
		b.Run(c.name, func(b *testing.B) { benchClaimComplete(b, c.limit) })
	}
}

func benchClaimComplete(b *testing.B, limit *store.LimitParams) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Config{URL: testenv.Postgres(b), Schema: fmt.Sprint("weirbench_", time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	b.Cleanup(func() {
		if _, err := s.Pool().Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{s.Schema()}.Sanitize()+" CASCADE"); err != nil {
			b.Errorf("drop schema %s: %v", s.Schema(), err)
		}
	})
	if _, err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	ex := s.Executor()
	if limit != nil {
		if _, err := ex.SetLimit(ctx, now, *limit); err != nil {
			b.Fatal(err)
		}
	}
	const claimSize, refill, inFlight = 10, 1000, 100
	batch := make([]store.InsertParams, refill)
	for i := range batch {
		batch[i] = store.InsertParams{Kind: "k", Payload: []byte(`{"doc":"a.txt"}`)}
	}
	b.ReportAllocs()
	var running []store.Lease
	left, done := 0, 0
	for b.Loop() {
		if left < claimSize {
			b.StopTimer()
			if _, err := ex.Insert(ctx, now, batch); err != nil {
				b.Fatal(err)
			}
			left += refill
			b.StartTimer()
		}
		jobs, err := ex.Claim(ctx, store.ClaimParams{Now: now, Limit: claimSize, Owner: "bench", LeaseFor: time.Minute})
		if err != nil || len(jobs) != claimSize {
			b.Fatalf("claimed %d jobs, %v", len(jobs), err)
		}
		for _, j := range jobs {
			running = append(running, store.LeaseOf(j))
		}
		for len(running) > inFlight {
			if _, err := ex.Complete(ctx, now, running[0]); err != nil {
				b.Fatal(err)
			}
			running = running[1:]
		}
		left -= claimSize
		done += claimSize
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(done), "ns/job")
}

// A claim from a hint takes the jobs of higher priorities than the
// hint's, then those of the hint's priority from its place in the claim
// order on, then those of lower priorities; it passes over the jobs of
// the hint's priority ordered before it (inserted with an earlier time),
// which the next claim without a hint takes.
func TestClaimFromAHintStartsThere(t *testing.T) {
	t.Parallel()
	ex := migratedExecutor(t)
	var ids []int64
	for i := range 5 {
		ids = append(ids, insert(t, ex, store.InsertParams{Kind: "k", Queue: "q", ScheduledAt: now.Add(time.Duration(i) * time.Second)}).Job.ID)
	}
	low := insert(t, ex, store.InsertParams{Kind: "k", Queue: "q", Priority: -1}).Job.ID
	claim := func(from store.ClaimFrom, limit int) []*weirtype.Job {
		t.Helper()
		jobs, err := ex.Claim(context.Background(), store.ClaimParams{Now: now.Add(time.Minute), Queue: "q", Limit: limit, Owner: "w", LeaseFor: time.Minute, From: from})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	first := claim(store.ClaimFrom{}, 2)
	if got := jobIDs(first); !slices.Equal(got, ids[:2]) {
		t.Fatalf("claim without a hint took %v, want %v", got, ids[:2])
	}
	// Jobs ordered before the hint, inserted after the first claim.
	high := insert(t, ex, store.InsertParams{Kind: "k", Queue: "q", Priority: 5}).Job.ID
	early := insert(t, ex, store.InsertParams{Kind: "k", Queue: "q", ScheduledAt: now.Add(-time.Hour)}).Job.ID
	from := store.ClaimFromJob(first[0])
	if got := jobIDs(claim(from, 2)); !slices.Equal(got, []int64{high, ids[2]}) {
		t.Fatalf("claim from job %d took %v, want %v", first[0].ID, got, []int64{high, ids[2]})
	}
	// The hint's priority runs out: the lower priorities follow.
	if got := jobIDs(claim(from, 5)); !slices.Equal(got, []int64{ids[3], ids[4], low}) {
		t.Fatalf("claim from job %d took %v, want %v", first[0].ID, got, []int64{ids[3], ids[4], low})
	}
	if got := jobIDs(claim(store.ClaimFrom{}, 5)); !slices.Equal(got, []int64{early}) {
		t.Fatalf("claim without a hint took %v, want the job the hint passed over, %v", got, []int64{early})
	}
	if _, err := ex.Claim(context.Background(), store.ClaimParams{Now: now, Queue: "q", Limit: 1, Owner: "w", LeaseFor: time.Minute,
		From: store.ClaimFrom{Priority: 1}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("claim from a place without a job: %v, want ErrInvalid", err)
	}
}

// jobIDs returns the ids of jobs, in order.
func jobIDs(jobs []*weirtype.Job) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// Two statements on the same held jobs, each with the leases in an order
// of its own (a client's heartbeat and its batch of completions), take
// the jobs' row locks in one order, that of their ids: they wait for
// each other, never deadlock. In the order of their arrays they
// deadlocked, each time holding both for the server's deadlock_timeout.
func TestHeldLeasesLockInOneOrder(t *testing.T) {
	t.Parallel()
	ex := migratedExecutor(t)
	ps := make([]store.InsertParams, 300)
	for i := range ps {
		ps[i] = store.InsertParams{Kind: "k", Queue: "q"}
	}
	if _, err := ex.Insert(context.Background(), now, ps); err != nil {
		t.Fatal(err)
	}
	jobs := claimAt(t, ex, now, "q", "w", len(ps), time.Hour)
	up := make([]store.Lease, len(jobs))
	for i, j := range jobs {
		up[i] = store.LeaseOf(j)
	}
	down := slices.Clone(up)
	slices.Reverse(down)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, leases := range [][]store.Lease{up, down} {
		wg.Go(func() {
			for range 30 {
				lost, err := ex.Heartbeat(context.Background(), now, leases, time.Hour)
				if err == nil && len(lost) > 0 {
					err = fmt.Errorf("heartbeat found %d leases lost", len(lost))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("heartbeats of one set of leases in opposite orders: %v", err)
	}
}

// CompleteAndClaim sends both statements in one batch, which PostgreSQL
// runs as one implicit transaction: when the claim fails in the database
// (an owner with a NUL byte, which a text cannot hold), the completions
// before it are rolled back, and the job stays running under its lease.
func TestCompleteAndClaimIsOneTransaction(t *testing.T) {
	ex := migratedExecutor(t)
	j := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "one-tx"})
	_, _, err := ex.(store.CompletingClaimer).CompleteAndClaim(context.Background(), []store.Lease{store.LeaseOf(j)},
		store.ClaimParams{Now: now.Add(time.Second), Queue: "one-tx", Limit: 1, Owner: "w\x00", LeaseFor: time.Minute})
	if err == nil {
		t.Fatal("a claim by an owner with a NUL byte succeeded")
	}
	got, err := ex.GetJob(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != weirtype.StateRunning || got.LeaseOwner != j.LeaseOwner {
		t.Fatalf("the failed call left job %d %s held by %q, want running under its lease (nothing written)", j.ID, got.State, got.LeaseOwner)
	}
}
