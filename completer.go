package weir

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// CompleteAtOnce, as Config.CompleteWithin, writes each success as soon
// as the completer is free, without waiting for the other jobs of its
// claim.
const CompleteAtOnce time.Duration = 1

const (
	// completeBatch is the most completions one CompleteMany writes.
	completeBatch = 100
	// writeRetryBase is the first wait before a failed write of an
	// attempt's outcome, or a failed listen, is tried again (see
	// writeBackoff and listenBackoff).
	writeRetryBase = 500 * time.Millisecond
	// listenRetryCap is the longest wait before a failed listen is tried
	// again.
	listenRetryCap = 30 * time.Second
)

// completion is a job whose worker succeeded, waiting for its completion
// to be written.
type completion struct {
	run *runningJob
	log *slog.Logger
	// kind, queue, ran (how long the attempt ran) and retried (it was
	// not the first attempt) feed the metrics and logs; createdAt is the
	// job's.
	kind, queue string
	ran         time.Duration
	retried     bool
	createdAt   time.Time
	// deadlineAt is the job's deadline, zero for none: a completion found
	// lost is stored as a late result when the deadline abandoned the job
	// meanwhile.
	deadlineAt time.Time
}

// completer writes the completions of successful jobs in batches: it
// takes every completion queued when it wakes, and writes them with one
// CompleteMany per completeBatch. Under load completions queue while a
// write is in flight, so batches grow with the load. With
// Config.CompleteWithin a success of a claim that emptied its queue also
// waits, that long at most, for the other attempts of that claim to end,
// so that they are completed together: one write per claim instead of
// one per job, and no wait for a job claimed alone or for the last of its
// claim. A full claim leaves jobs waiting, and its successes wait for no
// other of its attempts (that wait cost a drain on SQLite a tenth of its
// rate); with a store that writes completions with a claim they wait for
// the next claim instead (below). No wait in a client with a limited
// kind, where a limit counts the job running until its completion is
// written, nor on a clock other than the real one, where the wait would
// last until the clock moves. A job waiting for its completion stays
// among the client's running jobs, so heartbeats keep its lease, but its
// worker slot is free. Writes are bounded: at most cap(slots) completions wait at once,
// and a worker whose success finds none free waits for one. With a store
// that writes completions with a claim, a producer's claim takes the
// successes queued that wait for no other attempt (take), and gives them
// back when its write fails (taken): at a steady rate, where each claim
// empties the queue and the next comes a ClaimCooldown later, the
// successes of one claim ride with the next, and the completer writes
// almost nothing. With the queue full, the producer claims again once
// its workers took a batch of the jobs it claimed ahead, and the
// successes queued meanwhile wait for that claim, CompleteWithin at most
// (producer.busy): at a few workers on short jobs, where the
// completer, idle, wrote each success alone or in pairs, a commit per
// claim instead of one per claim and one or two per job.
type completer struct {
	slots chan struct{} // one per completion queued or being written
	wake  chan struct{} // a completion was queued
	// more is signalled when a gathering may be over: completeBatch
	// completions are queued, the last attempt of a claim ended, or a
	// claim wrote completions.
	more chan struct{}
	done chan struct{} // closed when the completer has exited

	mu      sync.Mutex
	queue   []completion
	stopped bool // no more batches: add writes the completion itself
}

func newCompleter(workers int) *completer {
	return &completer{
		// A batch being written, and as many completions again queued
		// behind it: the workers do not wait for a write unless it is
		// slower than they fill a batch.
		slots: make(chan struct{}, max(workers, completeBatch)+completeBatch),
		wake:  make(chan struct{}, 1),
		more:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
}

// add queues the completion of a job, or, once the completer has
// stopped, writes it at once (retrying as the last flush does).
func (cp *completer) add(c *Client, x completion) {
	cp.slots <- struct{}{}
	cp.mu.Lock()
	if cp.stopped {
		cp.mu.Unlock()
		c.writeCompletionsBounded([]completion{x})
		<-cp.slots
		return
	}
	cp.queue = append(cp.queue, x)
	full := len(cp.queue) >= completeBatch
	cp.mu.Unlock()
	select {
	case cp.wake <- struct{}{}:
	default:
	}
	if full {
		cp.nudge()
	}
}

// nudge tells a gathering completer to look again whether it waits for
// anything.
func (cp *completer) nudge() {
	select {
	case cp.more <- struct{}{}:
	default:
	}
}

// gather waits, up to Config.CompleteWithin, while a completion queued
// belongs to a claim with attempts still running, and fewer than
// completeBatch are queued (or until stop), when c gathers completions
// (see completer). With a store that writes completions with a claim
// (store.CompletingClaimer) it also waits while the producer of a queued
// completion that a claim can take is in its claim cooldown, and, once
// the cooldown is over, claimGrace more when that producer is about to
// claim: the claim takes the completions queued, and one commit writes
// both; and, after a claim of that producer that took all it asked
// for, until its next claim, up to CompleteWithin. It never waits
// longer than the longer of CompleteWithin and ClaimCooldown plus
// claimGrace.
func (cp *completer) gather(c *Client, stop <-chan struct{}) {
	if c.cfg.CompleteWithin <= CompleteAtOnce || c.limited() || !c.realTime {
		return
	}
	start := time.Now()
	groupBy := start.Add(c.cfg.CompleteWithin)
	// However the claims come, the completer waits no longer than this.
	latest := start.Add(max(c.cfg.CompleteWithin, c.cfg.ClaimCooldown+claimGrace))
	for {
		until := cp.waitUntil(c, groupBy)
		if until.After(latest) {
			until = latest
		}
		d := time.Until(until)
		if until.IsZero() || d <= 0 {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-cp.more:
		case <-stop:
			t.Stop()
			return
		}
		t.Stop()
	}
}

// claimGrace is how long a completion waits, past the end of a claim
// cooldown, for the claim that the producer woke for (see gather).
const claimGrace = 5 * time.Millisecond

// waitUntil is when gather stops waiting, as things are now: zero when it
// waits for nothing (completeBatch completions queued, or none waiting
// for the rest of its claim or for a claim). groupBy is the end of the
// wait for the rest of a claim.
func (cp *completer) waitUntil(c *Client, groupBy time.Time) time.Time {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.queue) >= completeBatch {
		return time.Time{}
	}
	now := time.Now()
	var until time.Time
	for _, x := range cp.queue {
		if g := x.run.group; g != nil && g.left.Load() > 0 && now.Before(groupBy) && groupBy.After(until) {
			until = groupBy
		}
		if c.completingClaimer == nil || !x.claimable() {
			continue
		}
		if p := c.producers[x.queue]; p != nil {
			if p.busy.Load() && now.Before(groupBy) && groupBy.After(until) {
				until = groupBy
			}
			if at := p.claimWait(now); at.After(until) {
				until = at
			}
		}
	}
	return until
}

// claimable reports whether a claim can write x: it has no output
// (CompleteMany's), and waits for no other attempt of its claim.
func (x completion) claimable() bool {
	g := x.run.group
	return x.run.output() == nil && (g == nil || g.left.Load() == 0)
}

// take removes from the queue up to n completions that a claim can write
// (claimable), and returns them (see Client.claimCompleting).
func (cp *completer) take(n int) []completion {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var xs []completion
	kept := cp.queue[:0]
	for _, x := range cp.queue {
		if len(xs) < n && x.claimable() {
			xs = append(xs, x)
		} else {
			kept = append(kept, x)
		}
	}
	clear(cp.queue[len(kept):])
	cp.queue = kept
	return xs
}

// taken ends the completions a claim took: written (their slots free,
// and the completer told to look again), or, when the write failed,
// queued again at the head for the completer to retry; once the completer
// has stopped, written here, as add does.
func (cp *completer) taken(c *Client, xs []completion, written bool) {
	if len(xs) == 0 {
		return
	}
	if !written {
		cp.mu.Lock()
		if !cp.stopped {
			cp.queue = append(xs, cp.queue...)
			cp.mu.Unlock()
			select {
			case cp.wake <- struct{}{}:
			default:
			}
			cp.nudge()
			return
		}
		cp.mu.Unlock()
		c.writeCompletionsBounded(xs)
	}
	for range xs {
		<-cp.slots
	}
	cp.nudge()
}

// run writes the queued completions whenever one is queued, until stop
// closes; then it writes those still queued and exits. A write that fails
// keeps its completions queued (their jobs stay among the running ones,
// their leases extended by heartbeats) and is retried after writeBackoff
// on the clock, or at the next wake.
func (cp *completer) run(c *Client, stop <-chan struct{}) {
	defer close(cp.done)
	var retry clock.Timer // pending retry of a failed write; nil for none
	failures := 0
	for {
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C()
		}
		select {
		case <-cp.wake:
			cp.gather(c, stop)
		case <-retryC:
			retry = nil
		case <-stop:
			if retry != nil {
				retry.Stop()
			}
			cp.flushLast(c)
			return
		}
		switch {
		case cp.flush(c):
			failures = 0
			if retry != nil {
				retry.Stop()
				retry = nil
			}
		case retry == nil:
			failures++
			retry = c.clock.NewTimer(c.writeBackoff(failures))
		}
	}
}

// flush writes every completion queued, and reports whether all were
// written; those whose write failed go back to the head of the queue.
func (cp *completer) flush(c *Client) bool {
	cp.mu.Lock()
	batch := cp.queue
	cp.queue = nil
	cp.mu.Unlock()
	var failed []completion
	for len(batch) > 0 {
		n := min(len(batch), completeBatch)
		if err := c.writeCompletions(batch[:n]); err != nil {
			failed = append(failed, batch[:n]...)
		} else {
			for range n {
				<-cp.slots
			}
		}
		batch = batch[n:]
	}
	if len(failed) == 0 {
		return true
	}
	cp.mu.Lock()
	cp.queue = append(failed, cp.queue...)
	cp.mu.Unlock()
	return false
}

// flushLast marks the completer stopped, so that nothing is queued after
// it, and writes every completion queued, retrying failed writes for up
// to releaseTimeout.
func (cp *completer) flushLast(c *Client) {
	cp.mu.Lock()
	batch := cp.queue
	cp.queue = nil
	cp.stopped = true
	cp.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), completeBatch)
		c.writeCompletionsBounded(batch[:n])
		for range n {
			<-cp.slots
		}
		batch = batch[n:]
	}
}

// writeBackoff is the wait before try n+1 of a write that failed n times:
// doubling from writeRetryBase, capped at HeartbeatEvery (heartbeats keep
// the leases meanwhile).
func (c *Client) writeBackoff(n int) time.Duration {
	hb := c.cfg.HeartbeatEvery
	return backoff.Exponential(min(writeRetryBase, hb), 2, hb).Scheduled(n)
}

// writeCompletionsBounded writes xs as writeCompletions does, retrying a
// failed write for up to releaseTimeout on the clock, or until Stop gives
// up (its context ended); then it gives up and forgets the jobs, which
// Stop gives back to the queue.
func (c *Client) writeCompletionsBounded(xs []completion) {
	deadline := c.clock.Now().Add(releaseTimeout)
	giveUp := func(err error) {
		c.log.Error("complete: giving up; the jobs will be given back", batchAttrs(xs, err)...)
		for _, x := range xs {
			c.forget(x.run.lease.ID, x.run)
		}
	}
	for n := 1; ; n++ {
		err := c.writeCompletions(xs)
		if err == nil {
			return
		}
		d := c.writeBackoff(n)
		if c.loopsCtx.Err() != nil || c.clock.Now().Add(d).After(deadline) {
			giveUp(err)
			return
		}
		if !clock.Sleep(c.clock, d, c.loopsCtx.Done()) {
			giveUp(err)
			return
		}
	}
}

// writeCompletions completes the jobs of xs in one CompleteMany, logs the
// outcome of each, and forgets them. On an error other than
// store.ErrLeaseLost it forgets none and returns the error: the caller
// retries.
func (c *Client) writeCompletions(xs []completion) error {
	ctx, cancel := c.storeCtx()
	defer cancel()
	return c.recordCompletions(xs, c.clock.Now(), func(now time.Time, leases []store.Lease) ([]int64, error) {
		if len(leases) == 0 {
			return nil, nil
		}
		return c.completeLeases(ctx, now, xs, leases)
	})
}

// recordCompletions completes the jobs of xs at now with write, which
// gets the leases of those not superseded (none, when all are) and
// returns the ids of the jobs it did not complete; then it logs the
// outcome of each and forgets them, as writeCompletions says.
func (c *Client) recordCompletions(xs []completion, now time.Time, write func(now time.Time, leases []store.Lease) ([]int64, error)) error {
	leases := make([]store.Lease, 0, len(xs))
	for _, x := range xs {
		// A superseded attempt's lease may equal its successor's (after a
		// requeue): it must not complete the successor's job.
		if !x.run.superseded.Load() {
			leases = append(leases, x.run.lease)
		}
	}
	lost, err := write(now, leases)
	if err != nil && !errors.Is(err, store.ErrLeaseLost) {
		// One line for the batch: a lost connection fails every job of
		// it alike.
		c.log.Warn("complete: write failed; will retry", batchAttrs(xs, err)...)
		return err
	}
	isLost := make(map[int64]bool, len(lost))
	for _, id := range lost {
		isLost[id] = true
	}
	for _, x := range xs {
		l := x.run.lease
		switch {
		case x.run.superseded.Load():
			c.cfg.Metrics.AttemptDone(x.kind, x.queue, weirtype.AttemptLeaseLost, x.ran)
			x.log.Warn("attempt superseded by a later one; its success is not recorded")
		case err != nil:
			c.logWriteErr(x.log, "complete", err)
		case isLost[l.ID] && !x.deadlineAt.IsZero() && now.After(x.deadlineAt):
			// The deadline abandoned the job while its completion waited.
			// One try: the completer must not wait on it.
			c.completeLate(x.log, &weirtype.Job{ID: l.ID, Kind: x.kind, Queue: x.queue, DeadlineAt: x.deadlineAt}, x.run, x.ran, false)
		case isLost[l.ID]:
			c.cfg.Metrics.AttemptDone(x.kind, x.queue, weirtype.AttemptLeaseLost, x.ran)
			c.logWriteErr(x.log, "complete", fmt.Errorf("weir: job %d at attempt %d: %w", l.ID, l.Attempt, store.ErrLeaseLost))
		default:
			c.cfg.Metrics.AttemptDone(x.kind, x.queue, weirtype.AttemptCompleted, x.ran)
			if x.retried {
				x.log.Info("job succeeded after retries", "latency", now.Sub(x.createdAt))
			} else {
				x.log.Debug("job completed")
			}
		}
		c.forget(l.ID, x.run)
	}
	for _, x := range xs {
		if c.wakeLimited(x.kind) {
			break
		}
	}
	return nil
}

// wakeLimited wakes every producer when kind is limited (an attempt of it
// has ended and its end is written, so that its limit may have room
// again), and reports whether it did.
func (c *Client) wakeLimited(kind string) bool {
	r := c.kinds[kind]
	if r == nil || !r.cfg.limited() {
		return false
	}
	for q := range c.producers {
		c.wake(q)
	}
	return true
}

// logBatchIDs is the most job ids a line about a batch (of completions,
// of leases a heartbeat found lost) names.
const logBatchIDs = 10

// batchAttrs are the attributes of a line about a batch of completions
// that failed with err: how many, the first logBatchIDs of their job ids,
// and the error.
func batchAttrs(xs []completion, err error) []any {
	ids := make([]int64, 0, min(len(xs), logBatchIDs))
	for _, x := range xs[:min(len(xs), logBatchIDs)] {
		ids = append(ids, x.run.lease.ID)
	}
	return []any{"jobs", len(xs), "job_ids", ids, "err", err.Error()}
}
