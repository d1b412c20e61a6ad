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
	// A queue with no job yet may be paused: its jobs wait from the first.
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

// limitCases are the cases of store.Limits and of the claim's obedience to
// them.
func limitCases() []suiteCase {
	return []suiteCase{
		{"LimitMaxRunningAcrossQueuesAndOwners", testLimitMaxRunning},
		{"LimitRateCountsStartsPerWindow", testLimitRate},
		{"LimitConcurrentClaimsNeverExceedIt", testLimitConcurrent},
		{"LimitRefusesBadInput", testLimitInvalid},
		{"LimitSetMovesKindsAndUnlimitRemoves", testLimitSetAndUnlimit},
		{"LimitHoldsABreakersProbe", testLimitProbe},
		{"LimitRateCountsABreakersProbe", testLimitProbeRate},
		{"LimitCountsTheRunningJobsOfAKindAddedLater", testLimitKindAdded},
	}
}

func setLimit(t *testing.T, ex store.Executor, p store.LimitParams) *weirtype.Limit {
	t.Helper()
	l, err := ex.SetLimit(context.Background(), now, p)
	if err != nil {
		t.Fatalf("set limit %+v: %v", p, err)
	}
	return l
}

func limits(t *testing.T, ex store.Executor) []*weirtype.Limit {
	t.Helper()
	ls, err := ex.ListLimits(context.Background())
	if err != nil {
		t.Fatalf("list limits: %v", err)
	}
	return ls
}

func testLimitMaxRunning(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	for range 5 {
		insertKinds(t, ex, "l1", "a", "c")
		insertKinds(t, ex, "l2", "b")
	}
	got := setLimit(t, ex, store.LimitParams{Key: "api", Kinds: []string{"b", "a", "a"}, MaxRunning: 3})
	want := weirtype.Limit{Key: "api", Kinds: []string{"a", "b"}, MaxRunning: 3, UpdatedAt: now}
	if !got.UpdatedAt.Equal(now) || got.Key != want.Key || !slices.Equal(got.Kinds, want.Kinds) || got.MaxRunning != 3 ||
		got.Rate != 0 || got.Per != 0 || got.Running != 0 {
		t.Fatalf("SetLimit = %+v, want %+v", *got, want)
	}
	// Kinds a (queue l1) and b (queue l2) share three running attempts;
	// kind c is not limited.
	first := claim(t, ex, now, "l1", "w1", 10)
	if k := kindsOf(first); !slices.Equal(k, []string{"a", "a", "a", "c", "c", "c", "c", "c"}) {
		t.Fatalf("claimed kinds %v, want three of a and every c", k)
	}
	wantClaimed(t, ex, now, "l2", "w2", 0, "claimed %v of kind b while the limit's three attempts run")
	if ls := limits(t, ex); len(ls) != 1 || ls[0].Running != 3 {
		t.Fatalf("ListLimits = %+v, want api with 3 running", ls)
	}
	// An attempt ends: one more may start, in any queue, by any owner.
	for _, j := range first {
		if j.Kind == "a" {
			if _, err := ex.Complete(ctx, now, store.LeaseOf(j)); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if got := claim(t, ex, now, "l2", "w2", 10); len(got) != 1 || got[0].Kind != "b" {
		t.Fatalf("claimed %v after one attempt ended, want one job of kind b", kindsOf(got))
	}
	wantClaimed(t, ex, now, "l1", "w1", 0, "claimed %v with the limit full again")
	// Raising the limit lets more start at once.
	setLimit(t, ex, store.LimitParams{Key: "api", Kinds: []string{"a"}, MaxRunning: 5})
	wantClaimed(t, ex, now, "l1", "w1", 2, "claimed %v after raising the limit to 5, want 2")
}

func testLimitRate(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	for range 10 {
		insertKinds(t, ex, "lr", "r")
	}
	insertKinds(t, ex, "lr", "free")
	setLimit(t, ex, store.LimitParams{Key: "r", Kinds: []string{"r"}, Rate: 4, Per: time.Minute})
	// now is on a minute: the window is [now, now+1m).
	got := claim(t, ex, now.Add(10*time.Second), "lr", "w1", 3)
	if len(got) != 3 {
		t.Fatalf("claimed %v, want 3 of the rate's 4", ids(got))
	}
	if got := kindsOf(claim(t, ex, now.Add(20*time.Second), "lr", "w1", 10)); !slices.Equal(got, []string{"free", "r"}) {
		t.Fatalf("claimed kinds %v, want the rate's last start and the unlimited job", got)
	}
	// Finished attempts do not give starts back within the window.
	for _, j := range got {
		if _, err := ex.Complete(ctx, now, store.LeaseOf(j)); err != nil {
			t.Fatal(err)
		}
	}
	wantClaimed(t, ex, now.Add(time.Minute-time.Microsecond), "lr", "w1", 0, "claimed %v with the window's 4 starts spent")
	ls := limits(t, ex)
	if len(ls) != 1 || ls[0].WindowStarts != 4 || !ls[0].WindowStart.Equal(now) || ls[0].Running != 1 {
		t.Fatalf("ListLimits = %+v, want 4 starts in the window at %v and 1 running", ls[0], now)
	}
	// The next window starts anew.
	wantClaimed(t, ex, now.Add(time.Minute), "lr", "w1", 4, "claimed %v in the next window, want 4")
	// A claimer whose clock lags counts against the newer window it finds.
	wantClaimed(t, ex, now.Add(50*time.Second), "lr", "w2", 0, "a lagging claimer took %v past the newer window's rate")
	// Changing the window resets its count.
	setLimit(t, ex, store.LimitParams{Key: "r", Kinds: []string{"r"}, Rate: 1, Per: time.Hour})
	wantClaimed(t, ex, now.Add(time.Minute), "lr", "w1", 1, "claimed %v after the window changed to an hour, want 1")
}

func testLimitConcurrent(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	for range 60 {
		insertKinds(t, ex, "lc", "c", "d")
	}
	setLimit(t, ex, store.LimitParams{Key: "c", Kinds: []string{"c"}, MaxRunning: 5})
	setLimit(t, ex, store.LimitParams{Key: "d", Kinds: []string{"d"}, Rate: 7, Per: time.Hour})
	var runningC []*weirtype.Job
	startedD := 0
	for round := range 4 {
		for _, j := range claimAtOnce(t, ex, now.Add(time.Duration(round)*time.Second), "lc", 8, 10) {
			if j.Kind == "c" {
				runningC = append(runningC, j)
			} else {
				startedD++
			}
		}
		if len(runningC) > 5 || startedD > 7 {
			t.Fatalf("round %d: %d of kind c running (limit 5), %d of kind d started (rate 7 an hour)", round, len(runningC), startedD)
		}
		if ls := limits(t, ex); len(ls) != 2 || ls[0].Running != len(runningC) {
			t.Fatalf("round %d: ListLimits = %+v, want c with %d running", round, ls, len(runningC))
		}
		// Two attempts of c end before the next round.
		for _, j := range runningC[:min(2, len(runningC))] {
			if _, err := ex.Complete(ctx, now, store.LeaseOf(j)); err != nil {
				t.Fatal(err)
			}
		}
		runningC = runningC[min(2, len(runningC)):]
	}
	if startedD != 7 {
		t.Fatalf("%d of kind d started in four rounds, want the rate's 7", startedD)
	}
}

func testLimitInvalid(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	for _, c := range []struct {
		name string
		p    store.LimitParams
	}{
		{"no key", store.LimitParams{Kinds: []string{"a"}, MaxRunning: 1}},
		{"no kinds", store.LimitParams{Key: "k", MaxRunning: 1}},
		{"an empty kind", store.LimitParams{Key: "k", Kinds: []string{""}, MaxRunning: 1}},
		{"negative max running", store.LimitParams{Key: "k", Kinds: []string{"a"}, MaxRunning: -1}},
		{"negative rate", store.LimitParams{Key: "k", Kinds: []string{"a"}, Rate: -1, Per: time.Second}},
		{"no limit at all", store.LimitParams{Key: "k", Kinds: []string{"a"}}},
		{"rate without per", store.LimitParams{Key: "k", Kinds: []string{"a"}, Rate: 1}},
		{"per without rate", store.LimitParams{Key: "k", Kinds: []string{"a"}, MaxRunning: 1, Per: time.Second}},
		{"per too short", store.LimitParams{Key: "k", Kinds: []string{"a"}, Rate: 1, Per: time.Microsecond}},
		{"per too long", store.LimitParams{Key: "k", Kinds: []string{"a"}, Rate: 1, Per: 25 * time.Hour}},
		{"per not whole microseconds", store.LimitParams{Key: "k", Kinds: []string{"a"}, Rate: 1, Per: time.Second + 1}},
		{"key not UTF-8", store.LimitParams{Key: "k\xff", Kinds: []string{"a"}, MaxRunning: 1}},
	} {
		if _, err := ex.SetLimit(ctx, now, c.p); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SetLimit with %s: %v, want ErrInvalid", c.name, err)
		}
	}
	if _, err := ex.Unlimit(ctx, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Unlimit of no kinds: %v, want ErrInvalid", err)
	}
	if ls := limits(t, ex); len(ls) != 0 {
		t.Fatalf("bad limits were recorded: %+v", ls)
	}
}

func testLimitSetAndUnlimit(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	setLimit(t, ex, store.LimitParams{Key: "k1", Kinds: []string{"a", "b"}, MaxRunning: 2})
	setLimit(t, ex, store.LimitParams{Key: "k2", Kinds: []string{"b"}, Rate: 5, Per: time.Second})
	ls := limits(t, ex)
	if len(ls) != 2 || ls[0].Key != "k1" || !slices.Equal(ls[0].Kinds, []string{"a"}) ||
		ls[1].Key != "k2" || !slices.Equal(ls[1].Kinds, []string{"b"}) || ls[1].Rate != 5 || ls[1].Per != time.Second {
		t.Fatalf("ListLimits = %+v %+v, want k1 with a alone and k2 with b", ls[0], ls[len(ls)-1])
	}
	if n, err := ex.Unlimit(ctx, []string{"a", "nothing"}); err != nil || n != 1 {
		t.Fatalf("Unlimit(a, nothing) = %d, %v; want 1", n, err)
	}
	if ls := limits(t, ex); len(ls) != 1 || ls[0].Key != "k2" {
		t.Fatalf("ListLimits after a was unlimited = %+v, want k2 alone (k1 had no kind left)", ls)
	}
	if n, err := ex.Unlimit(ctx, []string{"a"}); err != nil || n != 0 {
		t.Fatalf("Unlimit of a kind no limit holds = %d, %v; want 0, nil", n, err)
	}
	// Without limits, the kinds flow as before.
	insertKinds(t, ex, "lu", "a", "a", "a")
	wantClaimed(t, ex, now, "lu", "w1", 3, "claimed %v of an unlimited kind, want 3")
}

func testLimitProbe(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	insertKinds(t, ex, "lp", "a", "a", "a")
	setLimit(t, ex, store.LimitParams{Key: "a", Kinds: []string{"a"}, MaxRunning: 1})
	running := claim(t, ex, now, "lp", "w1", 10)
	if len(running) != 1 {
		t.Fatalf("claimed %v, want the limit's 1", ids(running))
	}
	open := 30 * time.Second
	pause(t, ex, now, store.PauseParams{Queue: "lp", Kind: "a", Cause: weirtype.PauseBreaker, Until: now.Add(open)})
	at := now.Add(open)
	wantClaimed(t, ex, at, "lp", "w1", 0, "claimed %v as a probe while the limit is full")
	if _, err := ex.Complete(ctx, at, store.LeaseOf(running[0])); err != nil {
		t.Fatal(err)
	}
	probe := claim(t, ex, at, "lp", "w1", 10)
	if len(probe) != 1 {
		t.Fatalf("claimed %v once the limit had room, want the probe", ids(probe))
	}
	if ls := limits(t, ex); ls[0].Running != 1 {
		t.Fatalf("the probe does not count: %+v", ls[0])
	}
}

func testLimitKindAdded(t *testing.T, h Harness) {
	ex := migratedExecutor(t, h)
	// Two of x run before x is limited; one of a runs under the limit.
	insertKinds(t, ex, "la", "x", "x")
	if got := kindsOf(claim(t, ex, now, "la", "w1", 2)); !slices.Equal(got, []string{"x", "x"}) {
		t.Fatalf("claimed kinds %v, want both of x", got)
	}
	insertKinds(t, ex, "la", "a", "a", "a")
	setLimit(t, ex, store.LimitParams{Key: "k", Kinds: []string{"a"}, MaxRunning: 3})
	if got := kindsOf(claim(t, ex, now, "la", "w1", 1)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("claimed kinds %v, want one of a", got)
	}
	setLimit(t, ex, store.LimitParams{Key: "k", Kinds: []string{"x"}, MaxRunning: 3})
	if got := claim(t, ex, now, "la", "w1", 1); len(got) != 0 {
		t.Fatalf("claimed %v with the limit's 3 attempts running (x's two counted since x joined)", ids(got))
	}
	if ls := limits(t, ex); len(ls) != 1 || ls[0].Running != 3 {
		t.Fatalf("ListLimits = %+v, want 3 running", ls)
	}
}

func testLimitProbeRate(t *testing.T, h Harness) {
	ctx := context.Background()
	ex := migratedExecutor(t, h)
	insertKinds(t, ex, "lq", "a", "a", "a")
	setLimit(t, ex, store.LimitParams{Key: "a", Kinds: []string{"a"}, Rate: 1, Per: time.Hour})
	pause(t, ex, now, store.PauseParams{Queue: "lq", Kind: "a", Cause: weirtype.PauseBreaker, Until: now.Add(time.Minute)})
	at := now.Add(time.Minute)
	probe := claim(t, ex, at, "lq", "w1", 1)
	if len(probe) != 1 {
		t.Fatalf("claimed %v at the probe time, want the probe", ids(probe))
	}
	if ls := limits(t, ex); ls[0].WindowStarts != 1 {
		t.Fatalf("the probe's start was not counted: %+v", ls[0])
	}
	if _, err := ex.Complete(ctx, at, store.LeaseOf(probe[0])); err != nil {
		t.Fatal(err)
	}
	wantClaimed(t, ex, at, "lq", "w1", 0, "claimed %v in the hour whose one start the probe took")
}
