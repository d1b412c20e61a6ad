package weir

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Error types the client records for attempts it ends itself, beside the
// store's (weirtype.ErrorTypeLeaseExpired and the others).
const (
	// errorTypeNoWorker: no worker is registered for the job's kind.
	errorTypeNoWorker = "no_worker"
	// errorTypeAttemptsSpent: the job was claimed with no attempt left
	// (its previous holder was released without giving its attempt back).
	errorTypeAttemptsSpent = "attempts_spent"
)

// producer claims and runs the jobs of one queue.
type producer struct {
	queue string
	max   int
	wake  chan struct{} // an insert made a job, or a limit may have room: claim now
	done  chan struct{} // a job finished: a slot is free (capacity max)
	// from is where the last full claim began, the next claim's hint
	// (store.ClaimParams.From); zero for none. headBy is when the
	// producer next claims from the head of the queue, without a hint.
	from   store.ClaimFrom
	headBy time.Time
	// head is set by wake: the next claim is from the head.
	head atomic.Bool
	// ready holds the jobs claimed ahead, which a worker goroutine runs
	// when its job ends; refill asks for more once it took one.
	ready  chan *claimedJob
	refill chan struct{}
	// claimTook and ranFor are moving averages, in nanoseconds on the
	// client's clock, of a claim's round trip and of an attempt's run
	// (see ahead).
	claimTook, ranFor atomic.Int64
	// coolUntil is the end of the claim cooldown the producer is in, as
	// nanoseconds since coolEpoch on the monotonic clock (0 for none),
	// and claimDue is set once a wake came during it: the producer claims
	// when it ends. The completer holds successes for that claim (see
	// completer.gather).
	coolUntil atomic.Int64
	claimDue  atomic.Bool
	// busy is set after a claim that took all it asked for: the next
	// comes once the workers took a batch of the jobs claimed ahead (or,
	// with none claimed ahead, once a worker is free), and the completer
	// holds successes for it, CompleteWithin at most. Cleared after a
	// claim that failed or came back short, and when the producer exits.
	busy atomic.Bool
}

// coolEpoch is the origin of producer.coolUntil.
var coolEpoch = time.Now()

// coolEnd sets p's cooldown to end d after at, a time of the real clock.
func (p *producer) coolEnd(at time.Time, d time.Duration) {
	p.coolUntil.Store(max(1, int64(at.Add(d).Sub(coolEpoch))))
}

// claimWait is when a success of p's queue queued at now stops waiting
// for p's next claim after a claim that emptied the queue: the end of
// p's cooldown, and claimGrace after it when p woke for a claim; zero
// for no wait.
func (p *producer) claimWait(now time.Time) time.Time {
	cool := p.coolUntil.Load()
	if cool == 0 {
		return time.Time{}
	}
	end := coolEpoch.Add(time.Duration(cool))
	switch {
	case now.Before(end):
		return end
	case p.claimDue.Load() && now.Before(end.Add(claimGrace)):
		return end.Add(claimGrace)
	}
	return time.Time{}
}

// ahead is how many jobs p claims beyond its free workers: about as many
// as its workers finish while a claim is in flight, so that a worker
// whose job ends starts the next at once instead of waiting a claim's
// round trip, and none when the attempts run long beside a claim (then a
// job claimed ahead would wait for a worker while another client could
// run it). None in a client with a limited kind: a job claimed ahead
// counts against its limit without running.
func (c *Client) ahead(p *producer) int {
	claim, ran := p.claimTook.Load(), p.ranFor.Load()
	if c.limited() || claim <= 0 || ran <= 0 {
		return 0
	}
	return int(min((int64(p.max)*claim+ran/2)/ran, int64(p.max)))
}

// batchPerAhead bounds toClaim's batch, in jobs claimed ahead: attempts
// that run long beside a claim (one job ahead, or two) keep a batch of
// a few jobs, not MaxWorkers of them waiting for workers while another
// process could run them.
const batchPerAhead = 4

// toClaim is how many jobs p claims now, with running of its workers
// busy; zero for no claim yet. With a worker idle (none is while jobs
// claimed ahead wait), the producer claims at once for every free slot
// and its reserve. With all busy, it holds in reserve the jobs its
// workers finish while a claim is in flight (ahead) and a batch (see
// batch), and claims once the batch has been taken from it: each claim
// takes a batch, while the rest of the reserve keeps the workers busy
// until it is back. Claiming for each job as it ends keeps a claim in
// flight for a job or two at a time instead, which at a few workers
// spends the database's time on claims, several per job's worth of
// work.
func (c *Client) toClaim(p *producer, running int) int {
	a := c.ahead(p)
	batch := c.batch(p, a)
	free := p.max - running + a + batch - len(p.ready)
	if free <= 0 || (running >= p.max && free < max(1, batch)) {
		return 0
	}
	return free
}

// batchSpan and batchSpanMax size a claim's batch for short attempts at
// a few workers (see batch).
const (
	batchSpan    = 5 * time.Millisecond
	batchSpanMax = 32
)

// readyCap is the capacity of a producer's jobs claimed ahead, given
// its workers: the most that ahead (workers) and batch (the larger of
// workers and batchSpanMax) hold, so that the producer never waits to
// hold what it claimed.
func readyCap(workers int) int {
	return workers + max(workers, batchSpanMax)
}

// batch is how many jobs a claim takes while p's workers are all busy,
// a ahead: as many as p has workers, at most batchPerAhead per job
// ahead, and, when that is less than the jobs p's workers run in
// batchSpan (short attempts at a few workers), those, up to
// batchSpanMax. A claim costs the store about as much for one job as
// for a few dozen: four workers on attempts of a millisecond, claiming
// four jobs at a time, made the store commit a claim for every four.
func (c *Client) batch(p *producer, a int) int {
	if a == 0 {
		return 0
	}
	batch := min(p.max, batchPerAhead*a)
	if ran := p.ranFor.Load(); ran > 0 {
		batch = max(batch, min(int(int64(p.max)*int64(batchSpan)/ran), batchSpanMax))
	}
	return batch
}

// average moves the moving average a (nanoseconds) an eighth of the way
// to d.
func average(a *atomic.Int64, d time.Duration) {
	old := a.Load()
	if old == 0 {
		a.Store(int64(d))
		return
	}
	a.Store(old + (int64(d)-old)/8)
}

// wake wakes the producer of queue, if this client works it, for a job
// this client made claimable (an insert, a retry, a requeue, a lifted
// pause). The job may be ordered before the producer's hint (a retry, a
// periodic tick, a job scheduled in the past), so its next claim is
// from the head.
func (c *Client) wake(queue string) {
	if p := c.producers[queue]; p != nil {
		p.head.Store(true)
		c.announced(queue)
	}
}

// announced wakes the producer of queue, if this client works it, for a
// job another process announced (LISTEN/NOTIFY on PostgreSQL): its next
// claim is from its hint, as it was. Most announcements are other
// processes' inserts, placed after the hint; claiming from the head for
// each read, under a producer holding a queue full, the entries of
// every job claimed since the table's last vacuum, about 1,000 index
// pages a claim after three minutes without one. A job announced with
// a place before the hint (a job given back with its old place, one
// from a process whose clock is behind) waits at most until the next
// claim from the head, PollEvery.
func (c *Client) announced(queue string) {
	if p := c.producers[queue]; p != nil {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// produce claims jobs of p's queue up to its free slots, whenever a slot
// frees, an insert wakes it or PollEvery passes, until Stop. Once a claim
// finds fewer jobs than it asked for, the queue is empty: freed slots no
// longer wake the producer, which waits for an insert, a retry due at
// once (finish wakes it) or the poll, so that an idle queue does not cost
// a claim per finished job. In a client with a limited kind a short claim
// may mean a limit without room, which the attempts of the kind free as
// they end, in this queue or another: there freed slots still wake the
// producer, and every producer is woken once an attempt of a limited kind
// has ended and its end is written (by the completer, for a success).
//
// While claims fail (the store is down) it waits longer after each, up to
// backoff.PollCap, so that an outage is not met with a claim and a log
// line every PollEvery.
func (c *Client) produce(p *producer) {
	defer c.producersWG.Done()
	defer func() {
		// No claim comes after this one: the completer holds no success
		// for it.
		p.busy.Store(false)
		c.completer.nudge()
	}()
	running, fails := 0, 0
	var claimedAt time.Time // when the last claim began
	for {
		empty := false
		select {
		case <-c.stopping:
			return
		default:
		}
		for drained := false; !drained; {
			select {
			case <-p.done:
				running--
			default:
				drained = true
			}
		}
		// Jobs claimed ahead that no worker took (each worker that found
		// none has signalled done) go to the free workers.
		for filled := false; running < p.max && !filled; {
			select {
			case cj := <-p.ready:
				running++
				c.start(p, cj)
			default:
				filled = true
			}
		}
		if c.strays.Load() {
			c.releaseStrays()
		}
		if free := c.toClaim(p, running); free > 0 {
			now := c.clock.Now()
			claimedAt = now
			ctx, cancel := c.storeCtx()
			// A claim and the start of what it took are one step for
			// releaseStrays, which must not take a job claimed and not yet
			// among the running ones for one whose claim was lost.
			c.claimMu.RLock()
			jobs, err := c.claim(ctx, p, now, free)
			if err == nil && len(jobs) < free && c.coolsDown() {
				// Set before the jobs start, so that the completer sees
				// it when their successes come.
				p.coolEnd(claimedAt, c.cfg.ClaimCooldown)
			}
			if busy := err == nil && len(jobs) == free; p.busy.Swap(busy) && !busy {
				// The successes held for a claim (given back, if this one
				// failed) wait for none now.
				c.completer.nudge()
			}
			if c.realTime { // a fake clock's jumps are no duration
				average(&p.claimTook, c.clock.Now().Sub(now))
			}
			// A claim that took all it asked for leaves jobs waiting: its
			// successes wait for the next claim (busy), not for each
			// other; only the jobs of a claim that emptied the queue wait
			// for each other's successes (see completer.gather).
			var g *claimGroup
			if len(jobs) > 0 && len(jobs) < free {
				g = &claimGroup{}
				g.left.Store(int64(len(jobs)))
			}
			for _, j := range jobs {
				cj := c.register(j, now, g)
				if running < p.max {
					running++
					c.start(p, cj)
				} else {
					p.ready <- cj
				}
			}
			c.claimMu.RUnlock()
			cancel()
			switch {
			case err != nil:
				fails++
				c.log.Error("claim jobs", "queue", p.queue, "failures_in_a_row", fails, "err", err)
				// The claim may have committed with its reply lost (a
				// connection cut): its jobs are held by this client and
				// run by none. Give them back now, not a lease later.
				c.strays.Store(true)
				c.releaseStrays()
			case fails > 0:
				c.log.Info("claim jobs: the store answers again", "queue", p.queue, "failures_in_a_row", fails)
				fails = 0
			}
			empty = len(jobs) < free
		}
		done := p.done
		if empty && !c.limited() {
			done = nil
		}
		t := c.clock.NewTimer(backoff.PollDelay(c.cfg.PollEvery, fails))
		select {
		case <-c.stopping:
			t.Stop()
			return
		case <-t.C():
		case <-p.wake:
			t.Stop()
			p.claimDue.Store(true)
			if empty && !c.cooldown(claimedAt) {
				return
			}
		case <-done:
			t.Stop()
			running--
		case <-p.refill:
			t.Stop()
		}
	}
}

// ClaimAtOnce, as Config.ClaimCooldown, claims as soon as an insert wakes
// the producer, however recently it claimed: the least pickup latency,
// for a claim per insert call at a trickle.
const ClaimAtOnce time.Duration = 1

// cooldown waits, after a claim that began at claimedAt and emptied its
// queue, until ClaimCooldown has passed since, so that inserts arriving
// one after another are claimed a few at a time rather than one claim
// each; it reports false when the client stops meanwhile. No wait in a
// client with a limited kind (a wake there may mean a limit's room), nor
// on a clock other than the real one.
func (c *Client) cooldown(claimedAt time.Time) bool {
	if !c.coolsDown() {
		return true
	}
	d := claimedAt.Add(c.cfg.ClaimCooldown).Sub(c.clock.Now())
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.stopping:
		return false
	case <-t.C:
		return true
	}
}

// coolsDown reports whether the producers wait ClaimCooldown after a
// claim that emptied their queue (see cooldown).
func (c *Client) coolsDown() bool {
	return c.cfg.ClaimCooldown > ClaimAtOnce && !c.limited() && c.realTime
}

// headClaimShare is the least time between two claims from the head of
// a queue whose claims can take a hint, in multiples of the last one's
// duration (see claim).
const headClaimShare = 10

// claim claims up to free jobs of p's queue at now. It claims from a
// hint (p.from), so that the store need not read again the traces of the
// jobs claimed before it: after a full claim, where that claim began (a
// job it passed over, locked by another claim, is still ahead); after a
// short one, its last job (it took every claimable job before); in both
// cases hintMargin earlier (see hintBefore). The
// hinted claim takes the higher priorities first, so a job of a higher
// priority inserted since is not passed over. At least every PollEvery,
// and in a client with a limited kind always, it claims from the head
// (which alone takes the limited kinds and a breaker's probe), so that a
// job ordered before the hint (a retry or a scheduled job come due, a job
// given back with its old place, one inserted by a process whose clock
// is behind) waits at most that long, or ten times as long as the last
// claim from the head took when that is longer; after this client made a job
// claimable (wake) it claims from the head at once. A claim that takes
// nothing leaves the hint as it was.
func (c *Client) claim(ctx context.Context, p *producer, now time.Time, free int) ([]*weirtype.Job, error) {
	from := p.from
	if p.head.Swap(false) || c.limited() || !now.Before(p.headBy) {
		from = store.ClaimFrom{}
	}
	if c.limited() {
		c.limitedClaims.Lock()
		defer c.limitedClaims.Unlock()
	}
	jobs, err := c.claimCompleting(ctx, store.ClaimParams{Now: now, Queue: p.queue, Limit: free, Owner: c.cfg.ID, LeaseFor: c.cfg.LeaseFor, From: from})
	p.coolUntil.Store(0)
	p.claimDue.Store(false)
	if from.IsZero() {
		// A claim from the head reads the entries that claimed jobs left
		// there, which only a vacuum removes: the longer it takes, the
		// rarer it is, so that the producer spends at most a tenth of its
		// time there however long the table goes without a vacuum.
		var took time.Duration
		if c.realTime { // a fake clock's jumps are no duration
			took = c.clock.Now().Sub(now)
		}
		p.headBy = now.Add(max(c.cfg.PollEvery, headClaimShare*took))
	}
	switch {
	case err != nil:
		p.from = store.ClaimFrom{}
	case len(jobs) == free:
		// Claimed in the claim order: the first is where it began.
		p.from = hintBefore(jobs[0])
	case len(jobs) > 0:
		p.from = hintBefore(jobs[len(jobs)-1])
	}
	return jobs, err
}

// claimCompleting claims with cp, and with a store that writes
// completions with a claim (store.CompletingClaimer) writes the successes
// queued in the completer in the same transaction: one commit for both,
// where the completer would make one more (see completer.gather, which
// holds them for the claim of a producer in its cooldown). On an error
// the successes go back to the completer, which retries them.
func (c *Client) claimCompleting(ctx context.Context, cp store.ClaimParams) ([]*weirtype.Job, error) {
	var xs []completion
	if c.completingClaimer != nil {
		xs = c.completer.take(completeBatch)
	}
	if len(xs) == 0 {
		return c.ex.Claim(ctx, cp)
	}
	var (
		jobs    []*weirtype.Job
		callErr error
	)
	err := c.recordCompletions(xs, cp.Now, func(_ time.Time, leases []store.Lease) ([]int64, error) {
		lost, js, err := c.completingClaimer.CompleteAndClaim(ctx, leases, cp)
		jobs, callErr = js, err
		if errors.Is(err, store.ErrLeaseLost) {
			// The call is all or nothing: no completion was written, and
			// none may be taken for a lost lease.
			err = fmt.Errorf("complete and claim: %v", err)
		}
		return lost, err
	})
	c.completer.taken(c, xs, err == nil)
	if err != nil {
		return nil, callErr
	}
	return jobs, nil
}

// hintMargin is how far before a claimed job's scheduled time the next
// claim's hint is placed: a job stamped before it by an insert that
// committed after the claim (inserts in flight at once commit in any
// order) is still ahead of the hint, unless its insert took longer.
const hintMargin = 25 * time.Millisecond

// hintBefore is the hint hintMargin before j's place in the claim order.
func hintBefore(j *weirtype.Job) store.ClaimFrom {
	return store.ClaimFrom{Priority: j.Priority, ScheduledAt: j.ScheduledAt.Add(-hintMargin), ID: 1}
}

// releaseStrays gives back the jobs the store says this client holds
// running that it does not run: those of a claim whose reply was lost.
// It holds claimMu, so that no claim is in flight while it reads the
// running jobs: every job a claim took is then either among them (kept)
// or taken by a claim that failed (given back, its attempt returned).
// While the store fails, strays stays set and the producers try again
// before their next claim.
func (c *Client) releaseStrays() {
	c.claimMu.Lock()
	defer c.claimMu.Unlock()
	if !c.strays.Load() {
		return // another producer did it meanwhile
	}
	c.mu.Lock()
	keep := make([]store.Lease, 0, len(c.running))
	for _, r := range c.running {
		keep = append(keep, r.lease)
	}
	c.mu.Unlock()
	ctx, cancel := c.storeCtx()
	ids, err := c.ex.ReleaseOwnedExcept(ctx, c.clock.Now(), c.cfg.ID, keep)
	cancel()
	if err != nil {
		c.log.Warn("give back the jobs of a failed claim: will try again before the next claim", "err", err.Error())
		return
	}
	c.strays.Store(false)
	if len(ids) == 0 {
		return
	}
	c.log.Warn("gave back jobs held by this client that it does not run (a claim's reply was lost); their attempts are returned",
		"jobs", len(ids), "job_ids", ids)
	for q := range c.producers {
		c.wake(q)
	}
}

// claimedJob is a job claimed by this client: registered among the
// running ones (its lease heartbeated) from its claim, run by a worker
// goroutine at once or, claimed ahead, once one is free.
type claimedJob struct {
	j   *weirtype.Job
	r   *runningJob
	ctx context.Context
}

// claimGroup counts the attempts of one claim that emptied its queue
// and have not ended: the completer waits for the rest of such a claim's
// successes before it writes one (see completer.gather).
type claimGroup struct{ left atomic.Int64 }

// register enters j, claimed at claimedAt with the others of g (nil for
// a claim whose successes do not wait for each other), among the running
// jobs.
func (c *Client) register(j *weirtype.Job, claimedAt time.Time, g *claimGroup) *claimedJob {
	ctx, cancel := context.WithCancelCause(c.jobsCtx)
	lease := store.LeaseOf(j)
	r := &runningJob{lease: lease, cancel: cancel, extended: claimedAt, group: g}
	c.mu.Lock()
	old := c.running[j.ID]
	c.running[j.ID] = r
	c.mu.Unlock()
	if old != nil {
		// The job was taken back (an insert of its key or the stuck sweep
		// found it stuck, or it was requeued after its deadline) and
		// claimed again by this client: the earlier attempt must not run
		// beside this one, nor write anything.
		c.log.Warn("job claimed again; cancelling the earlier attempt", "job_id", j.ID, "attempt", old.lease.Attempt)
		c.supersede(old)
	}
	c.jobsWG.Add(1)
	return &claimedJob{j: j, r: r, ctx: ctx}
}

// start runs cj in a worker goroutine of p, which then runs the jobs p
// claimed ahead while there are, and signals p.done once it has none.
func (c *Client) start(p *producer, cj *claimedJob) {
	c.handlers.Add(1)
	go func() {
		defer func() { p.done <- struct{}{} }()
		defer c.handlers.Add(-1)
		for ; cj != nil; cj = c.next(p) {
			began := c.clock.Now()
			c.execute(cj)
			average(&p.ranFor, c.clock.Now().Sub(began))
		}
	}()
}

// next takes a job p claimed ahead, if there is one and the client is
// not stopping, and asks p to claim more.
func (c *Client) next(p *producer) *claimedJob {
	select {
	case <-c.stopping:
		return nil
	default:
	}
	select {
	case cj := <-p.ready:
		select {
		case p.refill <- struct{}{}:
		default:
		}
		return cj
	default:
		return nil
	}
}

// execute runs the attempt cj.
func (c *Client) execute(cj *claimedJob) {
	defer c.jobsWG.Done()
	defer c.ended(cj.r)
	defer cj.r.cancel(nil)
	if err := context.Cause(cj.ctx); err != nil {
		// Claimed ahead, it lost its lease (or a later attempt superseded
		// it) before a worker took it: the store's rescue ends this
		// attempt, and the handler does not run without the lease.
		c.log.Warn("job claimed ahead lost its lease before it ran; not run", "job_id", cj.j.ID, "attempt", cj.j.Attempt, "err", err.Error())
		c.forget(cj.j.ID, cj.r)
		return
	}
	if !c.run(cj.ctx, cj.r, cj.j) {
		c.forget(cj.j.ID, cj.r)
		// Its end is written (a failure, a snooze): a limit of its
		// kind may have room in another queue.
		c.wakeLimited(cj.j.Kind)
	}
}

// dropAhead forgets the jobs p claimed ahead and no worker took, once
// the producers have stopped, and returns how many; Stop gives them back
// with the rest, their attempts returned.
func (c *Client) dropAhead(p *producer) (n int) {
	for {
		select {
		case cj := <-p.ready:
			c.forget(cj.j.ID, cj.r)
			cj.r.cancel(errStopping)
			c.ended(cj.r)
			c.jobsWG.Done()
			n++
		default:
			return n
		}
	}
}

// ended counts the end of the attempt r in its claim's group; the last
// of the group lets the completer write the group's successes.
func (c *Client) ended(r *runningJob) {
	if r.group != nil && r.group.left.Add(-1) == 0 {
		c.completer.nudge()
	}
}

// supersede cancels the attempt r, which may write nothing any more.
func (c *Client) supersede(r *runningJob) {
	r.superseded.Store(true)
	r.cancel(fmt.Errorf("weir: job %d: %w", r.lease.ID, store.ErrLeaseLost))
}

// forget drops the running job id, unless a later attempt runs it.
func (c *Client) forget(id int64, r *runningJob) {
	c.mu.Lock()
	if c.running[id] == r {
		delete(c.running, id)
	}
	c.mu.Unlock()
}

// run runs one attempt of j and records its outcome. It reports whether it
// handed the job to the completer, which then forgets the job once its
// completion is written.
func (c *Client) run(ctx context.Context, r *runningJob, j *weirtype.Job) (handedOff bool) {
	lease, cancel := r.lease, r.cancel
	log := jobLogger(c.log, j)
	reg := c.kinds[j.Kind]
	now := c.clock.Now()
	switch {
	case j.Attempt > j.MaxAttempts:
		c.abandon(log, j, lease, weirtype.AbandonMaxAttempts, errorTypeAttemptsSpent,
			fmt.Sprintf("weir: claimed for attempt %d of %d: no attempt left; abandoned without running", j.Attempt, j.MaxAttempts))
		return false
	case reg == nil:
		c.abandon(log, j, lease, weirtype.AbandonPermanent, errorTypeNoWorker,
			fmt.Sprintf("weir: no worker is registered for kind %q in client %s", j.Kind, c.cfg.ID))
		return false
	case pastDeadline(j, now):
		c.abandon(log, j, lease, weirtype.AbandonDeadline, weirtype.ErrorTypeDeadlineExceeded,
			fmt.Sprintf("weir: claimed after its deadline %s; abandoned without running", j.DeadlineAt.UTC().Format(time.RFC3339)))
		return false
	}

	var stops []func()
	if d := reg.cfg.Timeout; d > 0 {
		stops = append(stops, c.cancelAfter(d, cancel, &TimeoutError{Timeout: d}))
	}
	if !j.DeadlineAt.IsZero() {
		stops = append(stops, c.cancelAfter(j.DeadlineAt.Sub(now), cancel, &DeadlineError{DeadlineAt: j.DeadlineAt}))
	}
	spanCtx, span := c.startSpan(ctx, j)
	err := r.outcome(call(withAttempt(spanCtx, c, r), reg, j))
	r.ended.Store(true)
	tracing.End(span, err)
	for _, stop := range stops {
		stop()
	}
	return c.finish(ctx, log, reg, j, r, err, c.clock.Now().Sub(now))
}

// startSpan starts the span of an attempt of j, a child of ctx's, and
// returns it with its context. With no TracerProvider in the client's
// Config it makes no span, nor the attributes of one, and returns ctx
// (an attempt's context comes from the client's jobsCtx, which holds no
// span).
func (c *Client) startSpan(ctx context.Context, j *weirtype.Job) (context.Context, trace.Span) {
	if c.cfg.TracerProvider == nil {
		return ctx, nil
	}
	return c.tracer.Start(ctx, "weir.job "+j.Kind, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.Int64("weir.job.id", j.ID), attribute.String("weir.job.kind", j.Kind),
		attribute.String("weir.job.queue", j.Queue), attribute.Int("weir.job.attempt", j.Attempt)))
}

// cancelAfter cancels an attempt's context with cause after d on the
// clock, unless the returned stop is called first.
func (c *Client) cancelAfter(d time.Duration, cancel context.CancelCauseFunc, cause error) (stop func()) {
	t := c.clock.NewTimer(max(d, time.Nanosecond))
	stopped := make(chan struct{})
	go func() {
		select {
		case <-t.C():
			cancel(cause)
		case <-stopped:
			t.Stop()
		}
	}()
	return func() { close(stopped) }
}

// call runs the worker, turning a panic into a *PanicError.
func call(ctx context.Context, reg *registration, j *weirtype.Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return reg.work(ctx, j)
}

// finish records the outcome of an attempt that returned err after
// running for ran: decide says what it means, apply does it.
func (c *Client) finish(ctx context.Context, log *slog.Logger, reg *registration, j *weirtype.Job, r *runningJob, err error, ran time.Duration) (handedOff bool) {
	if snooze, refused := c.breakerOpen(reg, err); refused {
		log.Info("the kind's breaker refused the call; the job waits for its next probe", "err", err.Error())
		err = snooze
	}
	c.holdAfter(log, reg, j, err, c.clock.Now())
	end := attemptEnd{
		err: err, cause: context.Cause(ctx), superseded: r.superseded.Load(),
		now: c.clock.Now(), jitter: rand.Float64(),
	}
	return c.apply(log, reg, j, r, end, decide(j, reg.cfg, end), ran)
}

// apply does what d decided about the attempt r of j, which ended as end
// says after running for ran. A success is handed to the completer, which
// writes it with others (apply then reports true); any other outcome is
// written before apply returns.
func (c *Client) apply(log *slog.Logger, reg *registration, j *weirtype.Job, r *runningJob, end attemptEnd, d decision, ran time.Duration) (handedOff bool) {
	now := end.now
	m := c.cfg.Metrics
	switch d.verdict {
	case verdictSuperseded:
		log.Warn("attempt superseded by a later one; its outcome is not recorded", "err", fmt.Sprint(d.err))
		m.AttemptDone(j.Kind, j.Queue, d.outcome, ran)
		return false
	case verdictLate:
		c.completeLate(log, j, r, ran, true)
		return false
	case verdictComplete:
		c.completer.add(c, completion{run: r, log: log, kind: j.Kind, queue: j.Queue, ran: ran, deadlineAt: j.DeadlineAt, retried: j.Attempt > 1, createdAt: j.CreatedAt})
		return true
	case verdictInterrupted:
		log.Info("attempt interrupted", "cause", fmt.Sprint(end.cause), "err", d.err.Error())
		if d.outcome != "" {
			m.AttemptDone(j.Kind, j.Queue, d.outcome, ran)
		}
		return false
	case verdictSnooze:
		if err := c.retryWrite(log, "snooze", func(ctx context.Context) error {
			if r.superseded.Load() {
				return fmt.Errorf("weir: job %d: superseded by a later attempt: %w", j.ID, store.ErrLeaseLost)
			}
			_, err := c.ex.Snooze(ctx, now, r.lease, d.until)
			return err
		}); err != nil {
			c.logWriteErr(log, "snooze", err)
			return false
		}
		m.AttemptDone(j.Kind, j.Queue, weirtype.AttemptSnoozed, ran)
		if d.delay <= 0 {
			c.wake(j.Queue)
		}
		log.Debug("job snoozed", "for", d.delay)
		return false
	}

	p := store.FailParams{Now: now, Lease: r.lease, Error: d.failure, RetryAt: d.until}
	if d.verdict == verdictAbandon {
		p.Abandon = d.reason
	}
	if ferr := c.retryWrite(log, "record the failed attempt", func(ctx context.Context) error {
		if r.superseded.Load() {
			return fmt.Errorf("weir: job %d: superseded by a later attempt: %w", j.ID, store.ErrLeaseLost)
		}
		_, err := c.ex.Fail(ctx, p)
		return err
	}); ferr != nil {
		c.logWriteErr(log, "record the failed attempt", ferr)
		return false
	}
	m.AttemptDone(j.Kind, j.Queue, weirtype.AttemptFailed, ran)
	if p.Abandon != "" {
		m.DeadLettered(j.Kind, j.Queue, p.Abandon)
		log.Error("job abandoned to the dead-letter store", "reason", string(p.Abandon), "attempts", j.Attempt, "err", d.err.Error())
		return false
	}
	if !p.RetryAt.After(now) {
		c.wake(j.Queue)
	}
	log.Info("job failed; will retry", "retry_at", p.RetryAt, "delay", d.delay, "err", d.err.Error())
	if j.Attempt+1 == j.MaxAttempts {
		log.Warn("the next attempt is the job's last", "max_attempts", j.MaxAttempts)
	}
	if ttl := reg.cfg.TTL; ttl > 0 && p.RetryAt.Sub(ttlStart(j)) > ttl*4/5 {
		log.Warn("the job's retry comes close to its TTL", "ttl", ttl, "expires_at", ttlStart(j).Add(ttl))
	}
	return false
}

// completeLate records the success of an attempt that finished after its
// job's deadline as a late result, leaving the job abandoned; with retry,
// a failed write is tried again as retryWrite does, otherwise once.
func (c *Client) completeLate(log *slog.Logger, j *weirtype.Job, r *runningJob, ran time.Duration, retry bool) {
	var (
		lr        *weirtype.LateResult
		abandoned bool
	)
	write := func(ctx context.Context) error {
		if r.superseded.Load() {
			return fmt.Errorf("weir: job %d: superseded by a later attempt: %w", j.ID, store.ErrLeaseLost)
		}
		var err error
		lr, abandoned, err = c.ex.CompleteLate(ctx, c.clock.Now(), r.lease)
		return err
	}
	var err error
	if retry {
		err = c.retryWrite(log, "record the late result", write)
	} else {
		ctx, cancel := c.storeCtx()
		err = write(ctx)
		cancel()
	}
	if err != nil {
		c.cfg.Metrics.AttemptDone(j.Kind, j.Queue, weirtype.AttemptLeaseLost, ran)
		c.logWriteErr(log, "record the late result", err)
		return
	}
	c.cfg.Metrics.AttemptDone(j.Kind, j.Queue, weirtype.AttemptLate, ran)
	if abandoned {
		// This call abandoned the job, the deadline sweep not having done
		// it yet: count its dead letter, as the sweep would have.
		c.cfg.Metrics.DeadLettered(j.Kind, j.Queue, weirtype.AbandonDeadline)
	}
	log.Warn("job succeeded after its deadline; stored as a late result, the job stays abandoned",
		"late_result_id", lr.ID, "deadline_at", j.DeadlineAt)
}

// abandon sends j to the dead-letter store without running it.
func (c *Client) abandon(log *slog.Logger, j *weirtype.Job, lease store.Lease, reason weirtype.AbandonReason, errType, msg string) {
	now := c.clock.Now()
	err := c.retryWrite(log, "abandon", func(ctx context.Context) error {
		_, err := c.ex.Fail(ctx, store.FailParams{
			Now: now, Lease: lease, Abandon: reason,
			Error: weirtype.AttemptError{Attempt: j.Attempt, At: now, Message: msg, Type: errType},
		})
		return err
	})
	if err != nil {
		c.logWriteErr(log, "abandon", err)
		return
	}
	c.cfg.Metrics.DeadLettered(j.Kind, j.Queue, reason)
	log.Error("job abandoned to the dead-letter store", "reason", string(reason), "err", msg)
}

// retryWrite calls write, which records an attempt's outcome, until it
// succeeds or fails with store.ErrLeaseLost or store.ErrInvalid (which no
// retry can mend), waiting writeBackoff on the
// clock between tries; the job stays among the running ones meanwhile, so
// heartbeats keep its lease. Each call's context ends after the store
// timeout. It gives up, returning the last error, once Stop cancels the
// running jobs: Stop then gives the job back.
func (c *Client) retryWrite(log *slog.Logger, what string, write func(ctx context.Context) error) error {
	for n := 1; ; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), c.storeTimeout())
		err := write(ctx)
		cancel()
		if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrInvalid) {
			return err // done, or trying again cannot help
		}
		log.Warn(what+": write failed; will retry", "err", err.Error())
		if !clock.Sleep(c.clock, c.writeBackoff(n), c.jobsCtx.Done()) {
			return err
		}
	}
}

func (c *Client) logWriteErr(log *slog.Logger, what string, err error) {
	if errors.Is(err, store.ErrLeaseLost) {
		log.Warn(what+": lease lost; another worker holds the job, or it was cancelled", "err", err.Error())
		return
	}
	log.Error(what, "err", err.Error())
}

// heartbeatLoop extends the leases of the running jobs every
// HeartbeatEvery, and cancels the contexts of those whose lease is lost.
// It also wakes when a lease passes locally (its heartbeats failed for
// LeaseFor): expireLeases cancels that attempt, which another worker may
// run once the lease is rescued.
func (c *Client) heartbeatLoop() {
	defer c.loopsWG.Done()
	next := c.clock.Now().Add(c.cfg.HeartbeatEvery)
	for {
		wake := next
		if exp, ok := c.expireLeases(c.clock.Now()); ok && exp.Before(wake) {
			wake = exp
		}
		// A wake that has passed (the last heartbeat took that long) is
		// waited for no longer: a timer of 0 fires at once.
		if !clock.Sleep(c.clock, max(wake.Sub(c.clock.Now()), 0), c.loopsStop) {
			return
		}
		if now := c.clock.Now(); !now.Before(next) {
			c.heartbeat(now)
			next = now.Add(c.cfg.HeartbeatEvery)
		}
	}
}

// expireLeases cancels, with cause store.ErrLeaseLost, the attempts whose
// lease has passed at now (last extended LeaseFor ago or more) and stops
// heartbeating them. It returns when the earliest other lease passes, if
// any job is running.
func (c *Client) expireLeases(now time.Time) (earliest time.Time, ok bool) {
	var lapsed []*runningJob
	c.mu.Lock()
	for _, r := range c.running {
		if r.lapsed {
			continue
		}
		exp := r.extended.Add(c.cfg.LeaseFor)
		if !now.Before(exp) {
			r.lapsed = true
			lapsed = append(lapsed, r)
			continue
		}
		if !ok || exp.Before(earliest) {
			earliest, ok = exp, true
		}
	}
	c.mu.Unlock()
	if len(lapsed) == 0 {
		return earliest, ok
	}
	// One line however many leases passed (heartbeats fail alike).
	ids := cancelAttempts(lapsed, "lease passed without a heartbeat: ")
	c.log.Warn("leases passed without a successful heartbeat; cancelling the attempts",
		"jobs", len(lapsed), "job_ids", ids, "extended", lapsed[0].extended)
	return earliest, ok
}

// heartbeat extends, at now, the leases of the running jobs that have not
// lapsed.
func (c *Client) heartbeat(now time.Time) {
	c.expireLeases(now)
	c.mu.Lock()
	leases := make([]store.Lease, 0, len(c.running))
	for _, r := range c.running {
		if !r.lapsed {
			leases = append(leases, r.lease)
		}
	}
	c.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	ctx, done := c.storeCtx()
	lost, err := c.ex.Heartbeat(ctx, now, leases, c.cfg.LeaseFor)
	done()
	if err != nil {
		c.log.Error("heartbeat", "jobs", len(leases), "err", err.Error())
		return
	}
	isLost := make(map[int64]bool, len(lost))
	for _, id := range lost {
		isLost[id] = true
	}
	var cancel []*runningJob
	c.mu.Lock()
	for _, l := range leases {
		r := c.running[l.ID]
		if r == nil || r.lease != l {
			continue // finished meanwhile, or a later attempt
		}
		switch {
		case isLost[l.ID] && !r.ended.Load():
			cancel = append(cancel, r)
		case !isLost[l.ID] && !r.lapsed:
			r.extended = now
		}
	}
	c.mu.Unlock()
	if len(cancel) == 0 {
		return
	}
	// One line for the heartbeat, however many attempts it cancels.
	ids := cancelAttempts(cancel, "")
	c.log.Warn("heartbeat: leases lost (another worker holds the jobs, or they were cancelled); cancelling the attempts",
		"jobs", len(cancel), "job_ids", ids)
}

// cancelAttempts cancels each attempt of rs with store.ErrLeaseLost, its
// cause saying why first, and returns the first logBatchIDs of their job
// ids, for the one line that logs them.
func cancelAttempts(rs []*runningJob, why string) []int64 {
	ids := make([]int64, 0, min(len(rs), logBatchIDs))
	for _, r := range rs {
		if len(ids) < logBatchIDs {
			ids = append(ids, r.lease.ID)
		}
		r.cancel(fmt.Errorf("weir: job %d: %s%w", r.lease.ID, why, store.ErrLeaseLost))
	}
	return ids
}

// rescueLoop puts back the jobs whose leases expired, and abandons those
// past their deadline, at Start and every RescueEvery.
func (c *Client) rescueLoop() {
	defer c.loopsWG.Done()
	for {
		// Deadlines first: a job past its deadline whose lease also
		// expired is abandoned with its owner kept, so that a success its
		// slow worker still sends is kept as a late result.
		c.expireDeadlines()
		c.rescue()
		if !clock.Sleep(c.clock, c.cfg.RescueEvery, c.loopsStop) {
			return
		}
	}
}

func (c *Client) rescue() {
	ctx, cancel := c.storeCtx()
	defer cancel()
	rescued, dead, err := c.ex.RescueExpired(ctx, c.clock.Now(), rescueLimit)
	if err != nil {
		c.log.Error("rescue expired leases", "err", err.Error())
		return
	}
	c.cfg.Metrics.Rescued(len(rescued) + len(dead))
	if len(rescued) > 0 {
		c.log.Info("rescued jobs whose lease expired", "jobs", len(rescued))
		for _, j := range rescued {
			c.wake(j.Queue)
		}
	}
	c.reportDead(dead, weirtype.AbandonMaxAttempts, "lease expired on the last attempt")
}

// expireDeadlines abandons the jobs past their deadline, in batches of
// rescueLimit.
func (c *Client) expireDeadlines() {
	for {
		ctx, cancel := c.storeCtx()
		jobs, err := c.ex.ExpireDeadlines(ctx, c.clock.Now(), rescueLimit)
		cancel()
		if err != nil {
			c.log.Error("abandon the jobs past their deadline", "err", err.Error())
			return
		}
		c.reportDead(jobs, weirtype.AbandonDeadline, "the job's deadline passed before it completed")
		if len(jobs) < rescueLimit {
			return
		}
	}
}

// reportDead logs and counts the jobs that the store abandoned for
// reason.
func (c *Client) reportDead(jobs []store.JobRef, reason weirtype.AbandonReason, msg string) {
	for _, j := range jobs {
		c.cfg.Metrics.DeadLettered(j.Kind, j.Queue, reason)
		c.log.Error("job abandoned to the dead-letter store", "job_id", j.ID, "kind", j.Kind, "reason", string(reason), "err", msg)
	}
}

// storeTimeout bounds each store call of the client: LeaseFor −
// HeartbeatEvery, so that a call that hangs cannot outlast the leases a
// heartbeat must extend.
func (c *Client) storeTimeout() time.Duration {
	return c.cfg.LeaseFor - c.cfg.HeartbeatEvery
}

// storeCtx is the context of one store call of the client's loops: it
// ends after storeTimeout, or when Stop gives up.
func (c *Client) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.loopsCtx, c.storeTimeout())
}
