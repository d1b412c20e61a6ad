package storetest

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

// pauseCases are the cases of store.Pauses and of the claim's obedience to
// them.
func pauseCases() []suiteCase {
	return []suiteCase{
		{"PauseQueueHoldsItsJobsUntilResumed", testPauseQueue},
		{"PauseKindHoldsOnlyItsJobs", testPauseKind},
		{"PauseRefusesBadInput", testPauseInvalid},
		{"PauseRetryAfterHoldsUntilItsTime", testPauseRetryAfter},
		{"PauseBreakerLetsOneProbeThroughPerPeriod", testPauseBreakerProbe},
		{"PauseBreakerProbeTakenOnceByConcurrentClaims", testPauseBreakerConcurrent},
	}
}

// insertKinds inserts into queue, a minute before now, one job of each
// kind, in order, and returns their ids.
func insertKinds(t *testing.T, ex store.Executor, queue string, kinds ...string) []int64 {
	t.Helper()
	var out []int64
	for _, k := range kinds {
		out = append(out, insertOne(t, ex, now.Add(-time.Minute), store.InsertParams{Kind: k, Queue: queue}).Job.ID)
	}
	return out
}

func pause(t *testing.T, ex store.Executor, at time.Time, p store.PauseParams) *weirtype.Pause {
	t.Helper()
	got, err := ex.Pause(context.Background(), at, p)
	if err != nil {
		t.Fatalf("pause %+v: %v", p, err)
	}
	return got
}

// wantClaimed claims up to 10 jobs of queue for owner at at, and fails the
// test unless it took n, with why, a format of the ids it took.
func wantClaimed(t *testing.T, ex store.Executor, at time.Time, queue, owner string, n int, why string) {
	t.Helper()
	if got := claim(t, ex, at, queue, owner, 10); len(got) != n {
		t.Fatalf(why, ids(got))
	}
}

// claimAtOnce runs n claims of up to limit jobs of queue at once, at at,
// each by an owner of its own (wa, wb, ...), and returns what they took
// together.
func claimAtOnce(t *testing.T, ex store.Executor, at time.Time, queue string, n, limit int) []*weirtype.Job {
	t.Helper()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got []*weirtype.Job
	)
	for i := range n {
		wg.Go(func() {
			jobs, err := ex.Claim(context.Background(), store.ClaimParams{Now: at, Queue: queue, Limit: limit,
				Owner: "w" + string(rune('a'+i)), LeaseFor: lease})
			if err != nil {
				t.Errorf("claim: %v", err)
			}
			mu.Lock()
			got = append(got, jobs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

func kindsOf(jobs []*weirtype.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Kind)
	}
	slices.Sort(out)
	return out
}

func testPauseQueue(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	insertKinds(t, ex, "pq", "a", "b")
	insertKinds(t, ex, "other", "a")
	p := pause(t, ex, now, store.PauseParams{Queue: "pq", By: "ops", Reason: "index rebuild"})
	want := weirtype.Pause{Queue: "pq", Cause: weirtype.PauseOperator, By: "ops", Reason: "index rebuild", PausedAt: now}
	if *p != want {
		t.Fatalf("pause = %+v, want %+v", *p, want)
	}
	wantClaimed(t, ex, now, "pq", "w1", 0, "claimed %v from a paused queue")
	wantClaimed(t, ex, now, "other", "w1", 1, "claimed %v from another queue, want its job")
	// Pausing again keeps when the pause began, and takes the new words.
	again := pause(t, ex, now.Add(time.Minute), store.PauseParams{Queue: "pq", By: "ops2", Reason: "still"})
	if !again.PausedAt.Equal(now) || again.By != "ops2" {
		t.Fatalf("second pause = %+v, want PausedAt %v kept and By ops2", again, now)
	}
	list, err := ex.ListPauses(ctx, now.Add(time.Hour))
	if err != nil || len(list) != 1 || list[0].Queue != "pq" {
		t.Fatalf("ListPauses = %v, %v; want the pause of pq", list, err)
	}
	ended, err := ex.Resume(ctx, "pq", "", "")
	if err != nil || len(ended) != 1 || ended[0].Cause != weirtype.PauseOperator {
		t.Fatalf("Resume = %v, %v; want the operator's pause", ended, err)
	}
	if _, err := ex.Resume(ctx, "pq", "", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Resume of a queue not paused: %v, want ErrNotFound", err)
	}
	wantClaimed(t, ex, now, "pq", "w1", 2, "claimed %v after the resume, want both jobs")
}

func testPauseKind(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	insertKinds(t, ex, "pk", "a", "b", "a")
	running := claim(t, ex, now, "pk", "w1", 1)
	if len(running) != 1 || running[0].Kind != "a" {
		t.Fatalf("claimed %v, want the first job of kind a", ids(running))
	}
	pause(t, ex, now, store.PauseParams{Queue: "pk", Kind: "a"})
	insertKinds(t, ex, "pk", "a", "b")
	if got := kindsOf(claim(t, ex, now, "pk", "w1", 10)); !slices.Equal(got, []string{"b", "b"}) {
		t.Fatalf("claimed kinds %v from a queue whose kind a is paused, want b twice", got)
	}
	// A running job of the paused kind finishes.
	if _, err := ex.Complete(ctx, now, store.LeaseOf(running[0])); err != nil {
		t.Fatalf("complete a running job of a paused kind: %v", err)
	}
	// Pausing the queue too, then resuming the kind, still holds it.
	pause(t, ex, now, store.PauseParams{Queue: "pk"})
	if _, err := ex.Resume(ctx, "pk", "a", weirtype.PauseOperator); err != nil {
		t.Fatal(err)
	}
	wantClaimed(t, ex, now, "pk", "w1", 0, "claimed %v while the queue is paused")
	if _, err := ex.Resume(ctx, "pk", "", weirtype.PauseOperator); err != nil {
		t.Fatal(err)
	}
	if got := kindsOf(claim(t, ex, now, "pk", "w1", 10)); !slices.Equal(got, []string{"a", "a"}) {
		t.Fatalf("claimed kinds %v after both resumes, want a twice", got)
	}
}

func testPauseInvalid(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	insertKinds(t, ex, "pi", "a")
	for _, c := range []struct {
		name string
		p    store.PauseParams
		want error
	}{
		{"empty queue", store.PauseParams{}, store.ErrInvalid},
		{"unknown cause", store.PauseParams{Queue: "pi", Cause: "whim"}, store.ErrInvalid},
		{"operator with until", store.PauseParams{Queue: "pi", Until: now.Add(time.Hour)}, store.ErrInvalid},
		{"breaker of no kind", store.PauseParams{Queue: "pi", Cause: weirtype.PauseBreaker, Until: now.Add(time.Minute)}, store.ErrInvalid},
		{"retry_after until now", store.PauseParams{Queue: "pi", Kind: "a", Cause: weirtype.PauseRetryAfter, Until: now}, store.ErrInvalid},
		{"reason too long", store.PauseParams{Queue: "pi", Reason: string(make([]byte, store.MaxPauseReason+1))}, store.ErrInvalid},
		{"kind with no job", store.PauseParams{Queue: "pi", Kind: "typo"}, store.ErrNotFound},
		{"kind of another queue", store.PauseParams{Queue: "elsewhere", Kind: "a"}, store.ErrNotFound},
		{"queue with no job", store.PauseParams{Queue: "elsewhere"}, store.ErrNotFound},
	} {
		if _, err := ex.Pause(ctx, now, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: Pause = %v, want %v", c.name, err, c.want)
		}
	}
	// A kind the caller knows (a client registers it) may be paused
	// before its first job.
	pause(t, ex, now, store.PauseParams{Queue: "pi", Kind: "new", KnownKind: true})
	if list, err := ex.ListPauses(ctx, now); err != nil || len(list) != 1 || list[0].Kind != "new" {
		t.Fatalf("ListPauses = %v, %v; want only the pause of kind new", list, err)
	}
	// So may a queue the caller knows (a client works it); once paused,
	// it is known to anyone by its pause.
	pause(t, ex, now, store.PauseParams{Queue: "ahead", KnownQueue: true})
	pause(t, ex, now, store.PauseParams{Queue: "ahead", By: "ops"})
	if list, err := ex.ListPauses(ctx, now); err != nil || len(list) != 2 || list[0].Queue != "ahead" || list[0].By != "ops" {
		t.Fatalf("ListPauses = %v, %v; want the pause of queue ahead, by ops, and that of kind new", list, err)
	}
	if _, err := ex.Resume(ctx, "", "", ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Resume of no queue: %v, want ErrInvalid", err)
	}
	if _, err := ex.Resume(ctx, "pi", "new", weirtype.PauseBreaker); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Resume of a cause that does not hold: %v, want ErrNotFound", err)
	}
}

func testPauseRetryAfter(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	insertKinds(t, ex, "pr", "a", "a", "b")
	ra := func(until time.Time) store.PauseParams {
		return store.PauseParams{Queue: "pr", Kind: "a", Cause: weirtype.PauseRetryAfter, By: "llm", Until: until}
	}
	pause(t, ex, now, ra(now.Add(2*time.Minute)))
	// A shorter hint later does not cut the first.
	if p := pause(t, ex, now.Add(time.Second), ra(now.Add(time.Minute))); !p.Until.Equal(now.Add(2*time.Minute)) || !p.PausedAt.Equal(now) {
		t.Fatalf("second hold = %+v, want Until %v and PausedAt %v kept", p, now.Add(2*time.Minute), now)
	}
	if got := kindsOf(claim(t, ex, now.Add(2*time.Minute-time.Microsecond), "pr", "w1", 10)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("claimed kinds %v before the hold's end, want b only", got)
	}
	if list, _ := ex.ListPauses(ctx, now.Add(2*time.Minute)); len(list) != 0 {
		t.Fatalf("ListPauses at the hold's end = %v, want none", list)
	}
	if got := kindsOf(claim(t, ex, now.Add(2*time.Minute), "pr", "w1", 10)); !slices.Equal(got, []string{"a", "a"}) {
		t.Fatalf("claimed kinds %v at the hold's end, want a twice", got)
	}
	// A hold that has ended is replaced, PausedAt and all.
	p := pause(t, ex, now.Add(time.Hour), ra(now.Add(time.Hour+time.Minute)))
	if !p.PausedAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("new hold after the old ended: PausedAt %v, want %v", p.PausedAt, now.Add(time.Hour))
	}
}

func testPauseBreakerProbe(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	insertKinds(t, ex, "pb", "a", "a", "a", "b")
	open := 30 * time.Second
	pause(t, ex, now, store.PauseParams{Queue: "pb", Kind: "a", Cause: weirtype.PauseBreaker, By: "llm", Until: now.Add(open)})
	if got := kindsOf(claim(t, ex, now, "pb", "w1", 10)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("claimed kinds %v while the breaker is open, want b only", got)
	}
	// At the probe time one job, the first in claim order, is the probe.
	at := now.Add(open)
	probe := claim(t, ex, at, "pb", "w1", 10)
	if len(probe) != 1 || probe[0].Kind != "a" {
		t.Fatalf("claimed %v at the probe time, want one job of kind a", kindsOf(probe))
	}
	wantClaimed(t, ex, at, "pb", "w2", 0, "a second claim at the probe time took %v, want nothing")
	// The probe fails: the kind stays held another open period, then the
	// next probe goes through.
	if _, err := ex.Fail(ctx, store.FailParams{Now: at, Lease: store.LeaseOf(probe[0]), Error: attemptErr(1, "503"), RetryAt: at}); err != nil {
		t.Fatal(err)
	}
	wantClaimed(t, ex, at.Add(open-time.Microsecond), "pb", "w1", 0, "claimed %v before the next probe time")
	if list, _ := ex.ListPauses(ctx, at); len(list) != 1 || list[0].Cause != weirtype.PauseBreaker || !list[0].Until.Equal(at.Add(open)) {
		t.Fatalf("ListPauses after the probe was taken = %v, want the breaker's, until %v", list, at.Add(open))
	}
	at = at.Add(open)
	probe = claim(t, ex, at, "pb", "w1", 10)
	if len(probe) != 1 {
		t.Fatalf("claimed %v at the second probe time, want one probe", ids(probe))
	}
	// The probe succeeds: the pause ends and the kind flows again.
	if _, err := ex.Complete(ctx, at, store.LeaseOf(probe[0])); err != nil {
		t.Fatal(err)
	}
	if list, _ := ex.ListPauses(ctx, at); len(list) != 0 {
		t.Fatalf("ListPauses after the probe succeeded = %v, want none", list)
	}
	wantClaimed(t, ex, at, "pb", "w1", 2, "claimed %v after the probe succeeded, want the other two jobs of kind a (one retried)")
	// An operator's pause of the kind keeps even its probe waiting.
	insertKinds(t, ex, "pb", "a")
	pause(t, ex, at, store.PauseParams{Queue: "pb", Kind: "a", Cause: weirtype.PauseBreaker, Until: at.Add(open)})
	pause(t, ex, at, store.PauseParams{Queue: "pb", Kind: "a"})
	wantClaimed(t, ex, at.Add(open), "pb", "w1", 0, "claimed %v as a probe of a kind an operator paused")
	// CompleteMany ends a probe's pause too.
	if _, err := ex.Resume(ctx, "pb", "a", weirtype.PauseOperator); err != nil {
		t.Fatal(err)
	}
	probe = claim(t, ex, at.Add(open), "pb", "w1", 10)
	if len(probe) != 1 {
		t.Fatalf("claimed %v once the operator resumed, want the probe", ids(probe))
	}
	if lost, err := ex.CompleteMany(ctx, at.Add(open), []store.Lease{store.LeaseOf(probe[0])}); err != nil || len(lost) != 0 {
		t.Fatalf("CompleteMany = %v, %v", lost, err)
	}
	if list, _ := ex.ListPauses(ctx, at.Add(open)); len(list) != 0 {
		t.Fatalf("ListPauses after CompleteMany of the probe = %v, want none", list)
	}
}

func testPauseBreakerConcurrent(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	for range 20 {
		insertKinds(t, ex, "pc", "a")
	}
	pause(t, ex, now, store.PauseParams{Queue: "pc", Kind: "a", Cause: weirtype.PauseBreaker, Until: now.Add(time.Minute)})
	if taken := ids(claimAtOnce(t, ex, now.Add(time.Minute), "pc", 8, 5)); len(taken) != 1 {
		t.Fatalf("concurrent claims at the probe time took %v, want one probe", taken)
	}
}
