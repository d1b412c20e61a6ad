package breaker

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
)

// TestHammer runs many goroutines of mixed calls, outcomes, clock moves,
// trips, resets and snapshots against each strategy (run it with -race)
// and checks the invariants that must hold whatever the interleaving.
func TestHammer(t *testing.T) {
	for _, s := range []Strategy{
		CountInWindow(5, time.Second),
		FailureRate(0.5, 10, time.Second),
		Consecutive(3),
	} {
		t.Run(s.String(), func(t *testing.T) {
			t.Parallel()
			hammer(t, s)
		})
	}
}

func hammer(t *testing.T, s Strategy) {
	const (
		goroutines = 32
		calls      = 2000
		probes     = 3
		delay      = 50 * time.Millisecond
		jitter     = 0.5
	)
	errBoom := errors.New("boom")
	clk := clock.NewFake(time.Unix(0, 0))

	var (
		b           *Breaker
		trMu        sync.Mutex
		transitions []Transition
		inCallback  atomic.Int32
	)
	b, err := New(Config{
		Name:                 "hammer",
		Strategy:             s,
		OpenDelay:            delay,
		OpenJitter:           jitter,
		HalfOpenProbes:       probes,
		HalfOpenSuccessRatio: 0.5,
		Clock:                clk,
		OnStateChange: func(tr Transition) {
			if n := inCallback.Add(1); n != 1 {
				t.Errorf("%d callbacks at once", n)
			}
			trMu.Lock()
			transitions = append(transitions, tr)
			trMu.Unlock()
			checkSnapshot(t, s, b.Snapshot(), probes, delay, jitter)
			inCallback.Add(-1)
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	// probesOf[gen] counts the probes admitted in the half-open period gen,
	// less those whose outcome was ignored: never more than probes.
	var probesOf sync.Map
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range calls {
				switch r := rng.IntN(1000); {
				case r < 2:
					b.Trip()
				case r < 4:
					b.Reset()
				case r < 30:
					checkSnapshot(t, s, b.Snapshot(), probes, delay, jitter)
				}
				clk.Advance(time.Duration(rng.IntN(2000)) * time.Microsecond)

				var o Outcome
				switch r := rng.IntN(10); {
				case r < 6:
					o = Success
				case r < 9:
					o = Failure
				default:
					o = Ignored
				}
				if rng.IntN(4) == 0 {
					want := map[Outcome]error{Success: nil, Failure: errBoom, Ignored: Ignore(errBoom)}[o]
					err := b.Do(context.Background(), func(context.Context) error { return want })
					if err != want && !errors.Is(err, ErrOpen) {
						t.Errorf("Do = %v, want %v or ErrOpen", err, want)
					}
					continue
				}

				tk, err := b.Allow()
				if err != nil {
					var oe *OpenError
					if !errors.As(err, &oe) || oe.Name != "hammer" || oe.State == Closed || oe.RetryIn < 0 || oe.RetryIn > 2*delay {
						t.Errorf("Allow = %#v", err)
					}
					continue
				}
				var slot *atomic.Int64
				if tk.State() == HalfOpen {
					v, _ := probesOf.LoadOrStore(tk.gen, new(atomic.Int64))
					slot = v.(*atomic.Int64)
					if n := slot.Add(1); n > probes {
						t.Errorf("%d probes admitted in generation %d, want at most %d", n, tk.gen, probes)
					}
				}
				if rng.IntN(8) == 0 {
					clk.Advance(time.Millisecond) // a slow call
				}
				if slot != nil && o == Ignored {
					slot.Add(-1) // before Done, which frees the real slot
				}
				b.Done(tk, o)
			}
		})
	}
	wg.Wait()

	trMu.Lock()
	defer trMu.Unlock()
	if len(transitions) == 0 {
		t.Fatal("no transition happened")
	}
	prev := Transition{To: Closed, At: clk.Now().Add(-time.Hour)}
	for i, tr := range transitions {
		if tr.From != prev.To || tr.From == tr.To || tr.Snapshot.State != tr.To {
			t.Fatalf("transition %d: %v → %v (snapshot %v) after one to %v", i, tr.From, tr.To, tr.Snapshot.State, prev.To)
		}
		if tr.At.Before(prev.At) {
			t.Fatalf("transition %d at %v, before the previous one at %v", i, tr.At, prev.At)
		}
		prev = tr
	}
	if got := stateOf(b.word.Load()); got != prev.To {
		t.Errorf("state %v, last transition to %v", got, prev.To)
	}
	b.mu.Lock()
	if b.taken < 0 || b.taken > probes || b.pending != nil || b.draining {
		t.Errorf("taken %d, pending %d, draining %v", b.taken, len(b.pending), b.draining)
	}
	b.mu.Unlock()
	t.Logf("%d transitions", len(transitions))
}

func checkSnapshot(t *testing.T, s Strategy, snap Snapshot, probes int, delay time.Duration, jitter float64) {
	t.Helper()
	c := snap.Counts
	switch snap.State {
	case Closed:
		bad := c.Rejected != 0 || !snap.OpenedAt.IsZero() || !snap.NextProbeAt.IsZero()
		switch s := s.(type) {
		case countInWindow:
			bad = bad || c.Successes != 0 || c.Failures >= uint64(s.failures)
		case consecutive:
			bad = bad || c.Successes != 0 || c.Failures != c.ConsecutiveFailures || c.ConsecutiveFailures >= uint64(s.failures)
		}
		if bad {
			t.Errorf("closed snapshot %+v", snap)
		}
	case Open:
		wait := snap.NextProbeAt.Sub(snap.OpenedAt)
		lo := time.Duration(float64(delay) * (1 - jitter))
		hi := time.Duration(float64(delay) * (1 + jitter))
		if wait < lo || wait > hi {
			t.Errorf("open snapshot %+v: delay %v outside [%v, %v]", snap, wait, lo, hi)
		}
	case HalfOpen:
		// 0.5 × 3 probes: the second success closes it, any failure
		// reopens it.
		if c.Failures != 0 || c.Successes > 1 || c.ConsecutiveFailures != 0 ||
			snap.OpenedAt.IsZero() || !snap.NextProbeAt.IsZero() {
			t.Errorf("half-open snapshot %+v (%d probes)", snap, probes)
		}
	default:
		t.Errorf("snapshot in state %v", snap.State)
	}
}
