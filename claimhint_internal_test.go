package weir

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// claimsRecorded answers each Claim with the next of answers (as many
// jobs as it gives, ids from next) and records the params.
type claimsRecorded struct {
	engineStore
	answers []int
	next    int64
	params  []store.ClaimParams
	// slow sets the fake clock fc that long past the claim's time during
	// the claim of that index.
	fc   *clock.Fake
	slow map[int]time.Duration
}

func (c *claimsRecorded) Claim(_ context.Context, p store.ClaimParams) ([]*weirtype.Job, error) {
	if d, ok := c.slow[len(c.params)]; ok {
		c.fc.Set(p.Now.Add(d))
	}
	c.params = append(c.params, p)
	n := c.answers[0]
	c.answers = c.answers[1:]
	jobs := make([]*weirtype.Job, n)
	for i := range jobs {
		c.next++
		jobs[i] = &weirtype.Job{ID: c.next, ScheduledAt: p.Now, Priority: 0}
	}
	return jobs, nil
}

// The producer claims from where its last full claim began or its last
// short claim ended, keeps its hint after a claim that takes nothing,
// claims from the head at least every PollEvery, and never from a hint in
// a limited client.
func TestClaimHintsAndClaimsFromTheHead(t *testing.T) {
	t0 := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	fc := clock.NewFake(t0)
	rec := &claimsRecorded{answers: []int{4, 4, 4, 2, 0, 1, 4, 4, 4, 4, 4}, fc: fc, slow: map[int]time.Duration{6: 300 * time.Millisecond}}
	c := &Client{cfg: Config{ID: "w", PollEvery: time.Second, LeaseFor: time.Minute}, ex: rec, clock: fc, realTime: true}
	p := &producer{queue: "q"}
	claim := func(at time.Duration, free int) []*weirtype.Job {
		t.Helper()
		jobs, err := c.claim(context.Background(), p, t0.Add(at), free)
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	from := func(i int) store.ClaimFrom { return rec.params[i].From }

	first := claim(0, 4) // from the head: no hint yet
	claim(100*time.Millisecond, 4)
	if !from(0).IsZero() || from(1) != hintBefore(first[0]) {
		t.Fatalf("hints %+v then %+v, want none then the first job of the first claim", from(0), from(1))
	}
	third := claim(time.Second, 4) // PollEvery after the last claim from the head
	if !from(2).IsZero() {
		t.Fatalf("the claim a PollEvery after the head's has hint %+v, want none", from(2))
	}
	// A short claim: the next starts from its last job, and so does the
	// one after a claim that took nothing.
	short := claim(1100*time.Millisecond, 4)
	if len(short) != 2 || from(3) != hintBefore(third[0]) || p.from != hintBefore(short[1]) {
		t.Fatalf("short hinted claim: %d jobs, params %+v, next hint %+v", len(short), rec.params[3:], p.from)
	}
	if jobs := claim(1200*time.Millisecond, 4); len(jobs) != 0 || from(4) != hintBefore(short[1]) {
		t.Fatalf("claim after a short one: %d jobs from %+v, want none from the short claim's last job", len(jobs), from(4))
	}
	claim(1300*time.Millisecond, 4)
	if from(5) != hintBefore(short[1]) {
		t.Fatalf("claim after one that took nothing: hint %+v, want the hint kept", from(5))
	}
	// A claim from the head that took 300 ms: the next is 3 s later, not
	// a PollEvery.
	claim(2*time.Second, 4)
	claim(4900*time.Millisecond, 4)
	claim(5*time.Second, 4)
	if !from(6).IsZero() || from(7).IsZero() || !from(8).IsZero() {
		t.Fatalf("after a slow claim from the head, hints %+v, %+v, %+v; want none, one until 3 s later, none", from(6), from(7), from(8))
	}
	// A limited client claims from the head.
	c.limits = []store.LimitParams{{Key: "k", Kinds: []string{"k"}, MaxRunning: 1}}
	claim(5100*time.Millisecond, 4)
	claim(5200*time.Millisecond, 4)
	if !from(9).IsZero() || !from(10).IsZero() {
		t.Fatalf("a limited client's claims have hints %+v and %+v, want none", from(9), from(10))
	}
}
