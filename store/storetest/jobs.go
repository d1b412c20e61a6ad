package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// jobCases are the cases of the operator's job calls: ListJobs and
// RetryJob.
func jobCases() []suiteCase {
	return []suiteCase{
		{"ListJobsFiltersNewestFirst", testListJobs},
		{"ListJobsPagesWithBefore", testListJobsPaging},
		{"ListJobsRefusesBadFilters", testListJobsInvalid},
		{"RetryJobByState", testRetryJob},
		{"RetryJobOfDeadDeletesItsDeadLetter", testRetryDead},
		{"RetryJobKeepsCountingAttempts", testRetryStaleLease},
	}
}

func listJobs(t *testing.T, ex store.Executor, f store.JobFilter) []int64 {
	t.Helper()
	jobs, err := ex.ListJobs(context.Background(), f)
	if err != nil {
		t.Fatalf("list jobs %+v: %v", f, err)
	}
	return ids(jobs)
}

// jobsInEveryState makes one job of each state in queue, kinds alternating
// between "a" and "b", and returns them by state.
func jobsInEveryState(t *testing.T, ex store.Executor, queue string) map[weirtype.State]*weirtype.Job {
	t.Helper()
	ctx := context.Background()
	out := map[weirtype.State]*weirtype.Job{}
	ins := func(kind string, p store.InsertParams) *weirtype.Job {
		p.Kind, p.Queue = kind, queue
		return insertOne(t, ex, now.Add(-time.Minute), p).Job
	}
	// Inserted in this order, so that ids ascend through it.
	out[weirtype.StateRunning] = ins("a", store.InsertParams{MaxAttempts: 3})
	out[weirtype.StateCompleted] = ins("b", store.InsertParams{MaxAttempts: 1})
	out[weirtype.StateDead] = ins("a", store.InsertParams{MaxAttempts: 1})
	claimed := claim(t, ex, now, queue, "w1", 3)
	if len(claimed) != 3 {
		t.Fatalf("claimed %v, want 3 jobs", ids(claimed))
	}
	byID := map[int64]*weirtype.Job{}
	for _, j := range claimed {
		byID[j.ID] = j
	}
	c, err := ex.Complete(ctx, now, store.LeaseOf(byID[out[weirtype.StateCompleted].ID]))
	if err != nil {
		t.Fatal(err)
	}
	out[weirtype.StateCompleted] = c
	d, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(byID[out[weirtype.StateDead].ID]),
		Error: attemptErr(1, "boom"), Abandon: weirtype.AbandonMaxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	out[weirtype.StateDead] = d
	out[weirtype.StateRunning] = byID[out[weirtype.StateRunning].ID]
	out[weirtype.StateCancelled] = ins("b", store.InsertParams{})
	if out[weirtype.StateCancelled], err = ex.Cancel(ctx, now, out[weirtype.StateCancelled].ID); err != nil {
		t.Fatal(err)
	}
	out[weirtype.StateScheduled] = ins("a", store.InsertParams{ScheduledAt: now.Add(time.Hour), DeadlineAt: now.Add(2 * time.Hour)})
	out[weirtype.StateAvailable] = ins("b", store.InsertParams{})
	for st, j := range out {
		if j.State != st {
			t.Fatalf("job %d is %s, want %s", j.ID, j.State, st)
		}
	}
	return out
}

func testListJobs(t *testing.T, h Harness) {
	s := migrated(t, h)
	ex := s.Executor()
	js := jobsInEveryState(t, ex, "lj")
	other := insertOne(t, ex, now, store.InsertParams{Kind: "a", Queue: "lj-other"}).Job
	id := func(st weirtype.State) int64 { return js[st].ID }
	all := []int64{other.ID, id(weirtype.StateAvailable), id(weirtype.StateScheduled), id(weirtype.StateCancelled),
		id(weirtype.StateDead), id(weirtype.StateCompleted), id(weirtype.StateRunning)}
	checks := []struct {
		name string
		f    store.JobFilter
		want []int64
	}{
		{"all, newest first", store.JobFilter{}, all},
		{"one state", store.JobFilter{States: []weirtype.State{weirtype.StateDead}}, []int64{id(weirtype.StateDead)}},
		{"two states, one repeated", store.JobFilter{States: []weirtype.State{weirtype.StateCompleted, weirtype.StateScheduled, weirtype.StateCompleted}},
			[]int64{id(weirtype.StateScheduled), id(weirtype.StateCompleted)}},
		{"kind", store.JobFilter{Kinds: []string{"b"}}, []int64{id(weirtype.StateAvailable), id(weirtype.StateCancelled), id(weirtype.StateCompleted)}},
		{"kinds", store.JobFilter{Kinds: []string{"b", "a"}}, all},
		{"unknown kind", store.JobFilter{Kinds: []string{"c"}}, nil},
		{"queue", store.JobFilter{Queue: "lj-other"}, []int64{other.ID}},
		{"state, kind and queue", store.JobFilter{States: []weirtype.State{weirtype.StateAvailable, weirtype.StateScheduled},
			Kinds: []string{"a"}, Queue: "lj"}, []int64{id(weirtype.StateScheduled)}},
		// The running jobs are kept apart from the others' listing by
		// state (see the stores' indexes): alone, among other states,
		// cut by a limit and by Before.
		{"running", store.JobFilter{States: []weirtype.State{weirtype.StateRunning}}, []int64{id(weirtype.StateRunning)}},
		{"running among others", store.JobFilter{States: []weirtype.State{weirtype.StateRunning, weirtype.StateAvailable, weirtype.StateDead}},
			[]int64{other.ID, id(weirtype.StateAvailable), id(weirtype.StateDead), id(weirtype.StateRunning)}},
		{"running among others, limited", store.JobFilter{States: []weirtype.State{weirtype.StateDead, weirtype.StateRunning, weirtype.StateAvailable}, Limit: 3},
			[]int64{other.ID, id(weirtype.StateAvailable), id(weirtype.StateDead)}},
		{"running among others, before", store.JobFilter{States: []weirtype.State{weirtype.StateRunning, weirtype.StateCompleted}, Before: id(weirtype.StateCompleted)},
			[]int64{id(weirtype.StateRunning)}},
		{"limit", store.JobFilter{Limit: 2}, all[:2]},
		{"before", store.JobFilter{Before: id(weirtype.StateCancelled)}, all[4:]},
		{"before the first", store.JobFilter{Before: id(weirtype.StateRunning)}, nil},
	}
	for _, c := range checks {
		if got := listJobs(t, ex, c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// The jobs come whole, errors included.
	jobs, err := ex.ListJobs(context.Background(), store.JobFilter{States: []weirtype.State{weirtype.StateDead}})
	if err != nil || len(jobs) != 1 || jobs[0].Kind != "a" || jobs[0].Queue != "lj" || len(jobs[0].Errors) != 1 ||
		jobs[0].Errors[0] != attemptErr(1, "boom") || !jobs[0].FinalizedAt.Equal(now) {
		t.Fatalf("listed dead job %+v, %v", jobs, err)
	}
	// In a caller's transaction the list sees the transaction's own jobs.
	err = h.Tx(t, s, false, func(tx store.Executor, _ func(string) error) error {
		j := insertOne(t, tx, now, store.InsertParams{Kind: "in-tx", Queue: "lj-tx"}).Job
		if got := listJobs(t, tx, store.JobFilter{Queue: "lj-tx"}); !slices.Equal(got, []int64{j.ID}) {
			return fmt.Errorf("list in the transaction: %v, want [%d]", got, j.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testListJobsPaging(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	ps := make([]store.InsertParams, store.DefaultJobListLimit+5)
	for i := range ps {
		ps[i] = store.InsertParams{Kind: "page", Queue: "paging"}
	}
	res, err := ex.Insert(context.Background(), now, ps)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for i := len(res) - 1; i >= 0; i-- {
		want = append(want, res[i].Job.ID)
	}
	first := listJobs(t, ex, store.JobFilter{})
	if !slices.Equal(first, want[:store.DefaultJobListLimit]) {
		t.Fatalf("the default page has %d jobs %v…, want the newest %d", len(first), first[:min(3, len(first))], store.DefaultJobListLimit)
	}
	if got := listJobs(t, ex, store.JobFilter{Limit: store.MaxJobListLimit + 1}); !slices.Equal(got, want) {
		t.Fatalf("a limit above the maximum: %d jobs, want all %d", len(got), len(want))
	}
	// Paging with Before, 7 at a time, visits every job once, in order.
	var seen []int64
	f := store.JobFilter{Limit: 7}
	for {
		page := listJobs(t, ex, f)
		seen = append(seen, page...)
		if len(page) < f.Limit {
			break
		}
		f.Before = page[len(page)-1]
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("paged %v, want %v", seen, want)
	}
}

func testListJobsInvalid(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	for _, c := range []struct {
		f    store.JobFilter
		want string
	}{
		{store.JobFilter{States: []weirtype.State{weirtype.StateDead, "zombie"}}, `"zombie"`},
		{store.JobFilter{Limit: -1}, "limit -1"},
		{store.JobFilter{Before: -5}, "before -5"},
	} {
		_, err := ex.ListJobs(context.Background(), c.f)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ListJobs(%+v) = %v, want ErrInvalid naming %s", c.f, err, c.want)
		}
	}
}

func testRetryJob(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	js := jobsInEveryState(t, ex, "rj")
	at := now.Add(10 * time.Minute)

	// Available: returned as it is.
	av := js[weirtype.StateAvailable]
	got, err := ex.RetryJob(ctx, at, av.ID)
	if err != nil || got.State != weirtype.StateAvailable || !got.ScheduledAt.Equal(av.ScheduledAt) || !got.UpdatedAt.Equal(av.UpdatedAt) {
		t.Fatalf("retry of an available job: %+v, %v; want it unchanged", got, err)
	}

	// Scheduled: available at once, attempts, deadline and errors kept.
	sc := js[weirtype.StateScheduled]
	got, err = ex.RetryJob(ctx, at, sc.ID)
	if err != nil || got.State != weirtype.StateAvailable || !got.ScheduledAt.Equal(at) || !got.UpdatedAt.Equal(at) ||
		got.Attempt != 0 || got.MaxAttempts != sc.MaxAttempts || !got.DeadlineAt.Equal(sc.DeadlineAt) || len(got.Errors) != 0 {
		t.Fatalf("retry of a scheduled job: %+v, %v", got, err)
	}

	// Running: a conflict, nothing changed.
	ru := js[weirtype.StateRunning]
	if _, err := ex.RetryJob(ctx, at, ru.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("retry of a running job: %v, want ErrConflict", err)
	}
	if j := getJob(t, ex, ru.ID); j.State != weirtype.StateRunning || j.LeaseOwner != "w1" || !j.UpdatedAt.Equal(ru.UpdatedAt) {
		t.Fatalf("the running job changed: %+v", *j)
	}

	// Completed, with no attempt left: one more.
	co := js[weirtype.StateCompleted]
	got, err = ex.RetryJob(ctx, at, co.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkRetried(t, got, co, at, 2)

	// Cancelled before any attempt: its attempts stand.
	ca := js[weirtype.StateCancelled]
	got, err = ex.RetryJob(ctx, at, ca.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkRetried(t, got, ca, at, ca.MaxAttempts)

	// Dead (see also RetryJobOfDeadDeletesItsDeadLetter).
	de := js[weirtype.StateDead]
	got, err = ex.RetryJob(ctx, at, de.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkRetried(t, got, de, at, 2)

	// What RetryJob returned is what the store keeps.
	for _, j := range []*weirtype.Job{sc, co, ca, de} {
		if g := getJob(t, ex, j.ID); g.State != weirtype.StateAvailable || !g.ScheduledAt.Equal(at) {
			t.Fatalf("job %d after its retry: %+v", j.ID, *g)
		}
	}
	// The retried jobs run: a claim takes them, each at its next attempt.
	next := claim(t, ex, at, "rj", "w2", 10)
	slices.SortFunc(next, func(a, b *weirtype.Job) int { return int(a.ID - b.ID) })
	if want := []int64{co.ID, de.ID, ca.ID, sc.ID, av.ID}; !slices.Equal(ids(next), want) {
		t.Fatalf("claimed %v after the retries, want %v", ids(next), want)
	}
	if next[0].Attempt != 2 || next[1].Attempt != 2 || next[2].Attempt != 1 {
		t.Fatalf("attempts after the retries: %d %d %d, want 2 2 1", next[0].Attempt, next[1].Attempt, next[2].Attempt)
	}

	if _, err := ex.RetryJob(ctx, at, 999999); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("retry of a missing job: %v, want ErrNotFound", err)
	}
	if _, err := ex.RetryJob(ctx, time.Time{}, av.ID); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("retry at the zero time: %v, want ErrInvalid", err)
	}
}

// checkRetried checks a job that RetryJob brought back from before, a
// final state, at at.
func checkRetried(t *testing.T, got, before *weirtype.Job, at time.Time, maxAttempts int) {
	t.Helper()
	if got.ID != before.ID || got.State != weirtype.StateAvailable || !got.ScheduledAt.Equal(at) || !got.UpdatedAt.Equal(at) ||
		!got.FinalizedAt.IsZero() || !got.DeadlineAt.IsZero() || got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() ||
		got.Attempt != before.Attempt || got.MaxAttempts != maxAttempts || got.Kind != before.Kind || got.Queue != before.Queue {
		t.Fatalf("retried %s job\n got %+v\nwant it available at %v, attempt %d of %d", before.State, *got, at, before.Attempt, maxAttempts)
	}
	if len(got.Errors) != len(before.Errors)+1 || !slices.Equal(got.Errors[:len(before.Errors)], before.Errors) {
		t.Fatalf("retried %s job's errors %+v, want %+v and the retry", before.State, got.Errors, before.Errors)
	}
	last := got.Errors[len(got.Errors)-1]
	if last.Type != weirtype.ErrorTypeRetried || last.Attempt != before.Attempt || !last.At.Equal(at) || last.Message == "" {
		t.Fatalf("retried %s job's last error %+v, want one of type %s at attempt %d", before.State, last, weirtype.ErrorTypeRetried, before.Attempt)
	}
}

func testRetryDead(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	kill := func(key string) *weirtype.Job {
		j := claimOne(t, ex, store.InsertParams{Kind: "rd", IdempotencyKey: key, MaxAttempts: 1, DeadlineAt: now.Add(time.Hour)}, "w")
		d, err := ex.Fail(ctx, store.FailParams{Now: now, Lease: store.LeaseOf(j), Error: attemptErr(1, "boom"), Abandon: weirtype.AbandonPermanent})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	dead, kept := kill("rd-1"), kill("rd-2")
	at := now.Add(time.Minute)
	got, err := ex.RetryJob(ctx, at, dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkRetried(t, got, dead, at, 2)
	dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
	if err != nil || len(dls) != 1 || dls[0].JobID != kept.ID {
		t.Fatalf("dead letters after the retry: %+v, %v; want only job %d's", dls, err, kept.ID)
	}
	// The dead letter is gone, so neither a requeue nor a purge of the
	// dead-letter store can reach the retried job.
	if requeued, err := ex.RequeueDeadLetters(ctx, at, store.DeadLetterFilter{Kind: "rd"}); err != nil || !slices.Equal(requeued, []int64{kept.ID}) {
		t.Fatalf("requeue after the retry: %v, %v; want only %d", requeued, err, kept.ID)
	}
	if n, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{}); err != nil || n != 0 {
		t.Fatalf("purge after the retry: %d, %v", n, err)
	}
	if j := getJob(t, ex, dead.ID); j.State != weirtype.StateAvailable || j.Attempt != 1 || j.MaxAttempts != 2 {
		t.Fatalf("the retried job: %+v", *j)
	}
	// Its key still finds it, waiting.
	if r := insertOne(t, ex, at, store.InsertParams{Kind: "rd", IdempotencyKey: "rd-1"}); r.Outcome != weirtype.DuplicatePending || r.Job.ID != dead.ID {
		t.Fatalf("insert of the retried job's key: %s job %d", r.Outcome, r.Job.ID)
	}
	// Failing again abandons it again, with a new dead letter.
	again := claim(t, ex, at, dead.Queue, "w", 1)
	if len(again) != 1 || again[0].ID != dead.ID || again[0].Attempt != 2 {
		t.Fatalf("claim after the retry: %+v", again)
	}
	if _, err := ex.Fail(ctx, store.FailParams{Now: at, Lease: store.LeaseOf(again[0]), Error: attemptErr(2, "boom again"), Abandon: weirtype.AbandonMaxAttempts}); err != nil {
		t.Fatal(err)
	}
	dls, err = ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
	if err != nil || len(dls) != 1 || dls[0].JobID != dead.ID || dls[0].Attempts != 2 || len(dls[0].Errors) != 3 {
		t.Fatalf("dead letters after the second death: %+v, %v", dls, err)
	}
}

func testRetryStaleLease(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	// A running job is cancelled while its handler goes on; an operator
	// retries it and the same worker claims it again.
	j := claimOne(t, ex, store.InsertParams{Kind: "k", Queue: "stale-retry"}, "w1")
	if _, err := ex.Cancel(ctx, now, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.RetryJob(ctx, now, j.ID); err != nil {
		t.Fatal(err)
	}
	again := claim(t, ex, now, "stale-retry", "w1", 1)
	if len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("claim after the retry: %+v, want attempt 2", again)
	}
	// The first handler's lease cannot finish the new attempt.
	if _, err := ex.Complete(ctx, now, store.LeaseOf(j)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the cancelled attempt completed the retried job: %v", err)
	}
	if got, err := ex.Complete(ctx, now, store.LeaseOf(again[0])); err != nil || got.State != weirtype.StateCompleted {
		t.Fatalf("the new attempt could not complete: %+v, %v", got, err)
	}
}
