package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

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
