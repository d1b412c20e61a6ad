package storetest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// SimSeedEnv is the variable the drivers' tests read Harness.SimSeed from:
// it replays the simulation's fault schedule, whose seed every run prints.
const SimSeedEnv = "WEIR_SIM_SEED"

// testSimulation drives the job lifecycle's decisions (claim, heartbeat,
// lease expiry and rescue, retry, dead-letter, deadline, a restarted
// worker taking its jobs back) through three simulated workers on a fake
// clock, with a seeded random schedule of faults: a worker crashes (its
// leases are left to expire, or taken back when it restarts), pauses
// (misses its heartbeats, then tries to finish what it held), fails
// attempts, or loses a claim's reply and gives back what it took
// (ReleaseOwnedExcept, keeping what it holds). Each step is checked against the rules the engine relies on,
// and at the end, faults stopped, every job must reach a final state.
// The same seed gives the same run: the test runs its schedule twice and
// compares the two histories.
func testSimulation(t *testing.T, h Harness) {
	seed := rand.Uint64()
	if v := h.SimSeed; v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want a whole number", SimSeedEnv, v)
		}
	}
	t.Logf("seed %d (replay with %s=%d)", seed, SimSeedEnv, seed)
	first := simulate(t, migrated(t, h), seed)
	second := simulate(t, migrated(t, h), seed)
	if first != second {
		t.Fatalf("seed %d: two runs of one schedule ended differently: history %x, then %x", seed, first, second)
	}
}

// simWorker is a simulated worker process.
type simWorker struct {
	name    string
	crashed bool
	paused  bool
	held    map[int64]store.Lease
}

// simulate runs the schedule of seed against s and returns a hash of what
// happened: every call's outcome and every job's end.
func simulate(t *testing.T, s store.Store, seed uint64) uint64 {
	ctx := context.Background()
	ex := s.Executor()
	rng := rand.New(rand.NewPCG(seed, 0x73696d))
	history := fnv.New64a()
	note := func(format string, args ...any) { fmt.Fprintf(history, format+"\n", args...) }
	at := now
	const leaseFor = 30 * time.Second
	const jobs = 30

	var params []store.InsertParams
	for i := range jobs {
		p := store.InsertParams{Kind: "sim", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), MaxAttempts: 1 + rng.IntN(4)}
		if rng.IntN(4) == 0 {
			p.DeadlineAt = at.Add(time.Duration(1+rng.IntN(20)) * time.Minute)
		}
		params = append(params, p)
	}
	if _, err := ex.Insert(ctx, at, params); err != nil {
		t.Fatal(err)
	}
	workers := []*simWorker{{name: "w0"}, {name: "w1"}, {name: "w2"}}
	for _, w := range workers {
		w.held = map[int64]store.Lease{}
	}
	completed := map[int64]string{}   // job → the worker that completed it
	latest := map[int64]store.Lease{} // job → the lease of its latest claim
	final := map[int64]bool{}

	check := func(step int, what string) {
		t.Helper()
		for id := int64(1); id <= jobs; id++ {
			j, err := ex.GetJob(ctx, id)
			if err != nil {
				t.Fatalf("step %d (%s): job %d: %v", step, what, id, err)
			}
			if j.Attempt > j.MaxAttempts {
				t.Fatalf("step %d (%s): job %d at attempt %d of %d", step, what, id, j.Attempt, j.MaxAttempts)
			}
			if final[id] && !j.State.Final() {
				t.Fatalf("step %d (%s): job %d was final and is %s again", step, what, id, j.State)
			}
			if j.State.Final() {
				final[id] = true
			}
			if j.State == weirtype.StateCompleted && completed[id] == "" {
				t.Fatalf("step %d (%s): job %d completed without a Complete that succeeded", step, what, id)
			}
		}
	}

	// steps runs n steps of the schedule; with faults, workers crash,
	// pause and fail attempts.
	steps := func(n int, faults bool) {
		for step := range n {
			w := workers[rng.IntN(len(workers))]
			op := rng.IntN(10)
			if !faults && op >= 7 {
				op = rng.IntN(7)
			}
			what := ""
			switch {
			case op == 0: // time passes
				at = at.Add(time.Duration(1+rng.IntN(45)) * time.Second)
				what = "tick"
			case op <= 2 && !w.crashed && !w.paused: // claim
				what = "claim " + w.name
				got, err := ex.Claim(ctx, store.ClaimParams{Now: at, Limit: 1 + rng.IntN(3), Owner: w.name, LeaseFor: leaseFor})
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range got {
					if final[j.ID] {
						t.Fatalf("step %d: %s claimed job %d, which is final", step, w.name, j.ID)
					}
					w.held[j.ID] = store.LeaseOf(j)
					latest[j.ID] = store.LeaseOf(j)
					note("claim %s %d %d", w.name, j.ID, j.Attempt)
				}
			case op <= 4 && !w.crashed && len(w.held) > 0: // finish a held job: complete or fail
				id := pick(rng, w.held)
				l := w.held[id]
				delete(w.held, id)
				if rng.IntN(3) > 0 {
					what = fmt.Sprintf("complete %s %d", w.name, id)
					_, err := ex.Complete(ctx, at, l)
					switch {
					case err == nil:
						if l != latest[id] {
							t.Fatalf("step %d: %s completed job %d with lease %+v, not its latest %+v", step, w.name, id, l, latest[id])
						}
						if prev := completed[id]; prev != "" {
							t.Fatalf("step %d: job %d completed twice, by %s and %s", step, id, prev, w.name)
						}
						completed[id] = w.name
						note("completed %d %s", id, w.name)
					case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrFinal):
						note("complete refused %d %s", id, w.name)
					default:
						t.Fatal(err)
					}
				} else {
					what = fmt.Sprintf("fail %s %d", w.name, id)
					j, err := ex.GetJob(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					p := store.FailParams{Now: at, Lease: l, Error: weirtype.AttemptError{Attempt: l.Attempt, At: at, Type: "sim", Message: "fault"},
						RetryAt: at.Add(time.Duration(rng.IntN(60)) * time.Second)}
					if l.Attempt >= j.MaxAttempts {
						p.Abandon = weirtype.AbandonMaxAttempts // the engine's decision at the last attempt
					}
					_, err = ex.Fail(ctx, p)
					switch {
					case err == nil:
						if l != latest[id] {
							t.Fatalf("step %d: %s failed job %d with lease %+v, not its latest %+v", step, w.name, id, l, latest[id])
						}
						note("failed %d %s %v", id, w.name, p.Abandon)
					case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrFinal):
						note("fail refused %d %s", id, w.name)
					default:
						t.Fatal(err)
					}
				}
			case op == 5 && !w.crashed && !w.paused && len(w.held) > 0: // heartbeat
				what = "heartbeat " + w.name
				var leases []store.Lease
				for _, id := range sortedKeys(w.held) {
					leases = append(leases, w.held[id])
				}
				lost, err := ex.Heartbeat(ctx, at, leases, leaseFor)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range lost {
					delete(w.held, id)
				}
				note("heartbeat %s lost %v", w.name, lost)
			case op == 6: // the sweeps: expired leases, deadlines
				what = "sweeps"
				rescued, dead, err := ex.RescueExpired(ctx, at, 100)
				if err != nil {
					t.Fatal(err)
				}
				expired, err := ex.ExpireDeadlines(ctx, at, 100)
				if err != nil {
					t.Fatal(err)
				}
				note("rescued %v dead %v expired %v", rescued, dead, expired)
			case op == 7: // a worker crashes, or restarts and takes back what it held
				if w.crashed {
					what = "restart " + w.name
					released, err := ex.ReleaseOwned(ctx, at, w.name, false)
					if err != nil {
						t.Fatal(err)
					}
					w.crashed, w.held = false, map[int64]store.Lease{}
					note("restart %s released %v", w.name, released)
				} else {
					what = "crash " + w.name
					w.crashed = true
					note("crash %s", w.name)
				}
			case op == 8: // a worker pauses, or wakes
				w.paused = !w.paused
				what = fmt.Sprintf("pause %s %v", w.name, w.paused)
			case op == 9 && !w.crashed && !w.paused: // a claim whose reply is lost, then given back
				what = "lost claim " + w.name
				got, err := ex.Claim(ctx, store.ClaimParams{Now: at, Limit: 1 + rng.IntN(3), Owner: w.name, LeaseFor: leaseFor})
				if err != nil {
					t.Fatal(err)
				}
				var lost []int64
				for _, j := range got {
					if final[j.ID] {
						t.Fatalf("step %d: %s claimed job %d, which is final", step, w.name, j.ID)
					}
					latest[j.ID] = store.LeaseOf(j)
					lost = append(lost, j.ID)
				}
				keep := make([]store.Lease, 0, len(w.held))
				for _, id := range sortedKeys(w.held) {
					keep = append(keep, w.held[id])
				}
				released, err := ex.ReleaseOwnedExcept(ctx, at, w.name, keep)
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(lost)
				if !slices.Equal(released, lost) {
					t.Fatalf("step %d: %s gave back %v after a lost claim of %v, holding %v", step, w.name, released, lost, sortedKeys(w.held))
				}
				note("lost claim %s released %v", w.name, released)
			default:
				continue
			}
			check(step, what)
		}
	}

	steps(600, true)
	// Faults stop: every worker is back, and the work must drain.
	for _, w := range workers {
		w.paused = false
		if w.crashed {
			if _, err := ex.ReleaseOwned(ctx, at, w.name, false); err != nil {
				t.Fatal(err)
			}
			w.crashed, w.held = false, map[int64]store.Lease{}
		}
	}
	for round := 0; len(final) < jobs; round++ {
		if round > 200 {
			var left []int64
			for id := int64(1); id <= jobs; id++ {
				if !final[id] {
					left = append(left, id)
				}
			}
			t.Fatalf("jobs %v never reached a final state after the faults stopped", left)
		}
		at = at.Add(time.Minute)
		steps(20, false)
	}
	letters := map[int64]int{}
	dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range dls {
		letters[dl.JobID]++
	}
	for id := int64(1); id <= jobs; id++ {
		j, err := ex.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[j.State == weirtype.StateDead]; letters[id] != want {
			t.Fatalf("job %d ended %s with %d dead letters, want %d", id, j.State, letters[id], want)
		}
		note("end %d %s %d", id, j.State, j.Attempt)
	}
	return history.Sum64()
}

// pick returns a key of m, chosen by rng among the keys in order.
func pick(rng *rand.Rand, m map[int64]store.Lease) int64 {
	keys := sortedKeys(m)
	return keys[rng.IntN(len(keys))]
}

func sortedKeys(m map[int64]store.Lease) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
