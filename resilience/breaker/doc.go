// Package breaker is a circuit breaker: after repeated failures it stops
// calling a dependency for a while, so that the dependency can recover and
// callers fail fast instead of waiting on it.
//
// A [Breaker] is Closed, Open or HalfOpen. Closed lets every call through
// and feeds the outcomes to a trip [Strategy]. When the strategy trips,
// the breaker is Open: every call fails at once with an [*OpenError]
// (errors.Is(err, [ErrOpen])) until the open delay has passed. The next
// call, [Breaker.State] or [Breaker.Snapshot] after that moves it to
// HalfOpen, where a few probe calls test the dependency: enough
// successful probes close it, and any failed probe opens it again.
//
// # Thresholds
//
// Each comparison below is exact; the tests check both sides of each.
//
//   - CountInWindow(n, w) opens on the n-th failure (count ≥ n) within a
//     rolling window w, a failure at time t being in the window at now
//     while now - t < w. So n failures spread over exactly w do not open
//     it. Successes do not reset the count. Default: n = 5, w = 30 s.
//   - FailureRate(r, m, w) opens when, within the window w, calls ≥ m
//     and failures/calls > r (strictly greater): at r = 0.5 and m = 10,
//     5 failures in 10 calls stay closed, 6 open, and 9 failures in 9
//     calls stay closed. The window is 10 buckets of w/10, so an outcome
//     counts for more than 0.9 w and at most w. The weir default window
//     is 30 s, and [FailureRateConfig] pairs r = 0.5, m = 10 with a 30 s
//     open delay.
//   - Consecutive(n) opens on the n-th failure in a row (run ≥ n); a
//     success ends the run.
//   - The open delay, OpenDelay ± OpenJitter, is over once now ≥ the
//     next-probe time: the call at exactly that instant is admitted.
//   - HalfOpen admits exactly HalfOpenProbes calls in total for the
//     period; the others get an *OpenError. It closes once the successful
//     probes are > HalfOpenSuccessRatio × HalfOpenProbes (strictly: with
//     the defaults of 1 probe and 0.8, one success closes it; with 5
//     probes, all 5 must succeed; with 10, 9 must). Any failed probe
//     reopens it at once, with a new open delay.
//
// # Outcomes
//
// Each call ends as a Success, a Failure or Ignored, as Config.Classify
// says. The default, [DefaultClassify], ignores the caller's own
// cancellation (ctx is done and the error is context.Canceled or
// context.DeadlineExceeded) and errors marked with [Ignore]; any other
// non-nil error is a failure. An ignored outcome is not counted at all:
// it neither adds a failure nor ends a run of them, and an ignored probe
// gives its slot back, so a half-open breaker cannot be stuck waiting for
// probes that were cancelled.
//
// Every change of state starts a new generation. An outcome is recorded
// only if its call was admitted in the current generation, so a slow call
// that started before the breaker opened cannot reopen it, nor close it,
// later.
//
// # Calls
//
// [Breaker.Do] runs a func through the breaker. Callers that decide the
// outcome themselves use [Breaker.Allow], make the call, and pass the
// [Ticket] and an [Outcome] to [Breaker.Done]. In the closed state, Allow
// and a successful Done of CountInWindow and Consecutive breakers are one
// atomic load each, with no allocation, no lock and no clock reading; only
// the first success after a failure takes the lock, to end the run of
// failures. FailureRate reads the clock and takes the lock to count each
// success. A call that panics in Do counts as a failure, and the panic
// goes on.
//
// # Callbacks
//
// Config.OnStateChange receives a [Transition] for every change of state,
// in the order of the changes, one at a time, and never with the
// breaker's lock held: a callback may call Snapshot, Trip or Reset. The
// changes are queued under the lock and delivered after it is released by
// the goroutine that made them, or, if another goroutine is delivering
// already, by that goroutine. A callback must not panic: the panic goes
// up through the call that was delivering, the changes queued behind it
// are delivered with the next one, and if that call had just taken a
// half-open probe slot, the slot stays taken until the breaker is Tripped
// or Reset.
package breaker
