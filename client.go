package weir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/internal/tracing"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Defaults of Config.
const (
	DefaultMaxWorkers      = 10
	DefaultLeaseFor        = time.Minute
	DefaultPollEvery       = time.Second
	DefaultCompleteWithin  = 10 * time.Millisecond
	DefaultClaimCooldown   = 25 * time.Millisecond
	DefaultRescueEvery     = 30 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultStuckAfter      = store.DefaultStuckAfter
	DefaultSweepEvery      = 15 * time.Minute
	// rescueLimit is how many expired leases one rescue takes.
	rescueLimit = 1000
	// releaseTimeout bounds Stop's last write, which gives back the jobs
	// still held, even when Stop's context has ended.
	releaseTimeout = 10 * time.Second
)

// QueueConfig configures how a client works one queue.
type QueueConfig struct {
	// MaxWorkers is how many of the queue's jobs the client runs at once.
	// Default 10.
	//
	// While the queue is busy the client also holds jobs claimed ahead:
	// about as many as its workers finish while one claim is in flight
	// (measured as it runs, at most MaxWorkers) and a batch of up to
	// MaxWorkers more (four per job of the first), or, when more, the
	// jobs its workers run in 5 ms, up to 32; none when attempts run
	// long beside a claim or a kind of the
	// client has a limit. A worker whose job ends starts one of them at
	// once instead of waiting for a claim, and with every worker busy the
	// client claims a batch at a time, not a job at a time as they end.
	// They are held as running jobs are (leased, heartbeated):
	// Stop gives back those no worker took, their attempts returned; a
	// killed process's restart takes them back with the rest it held.
	MaxWorkers int
}

// Config configures a Client. Its zero value, with a Store, works.
type Config struct {
	// Store keeps the jobs. Required. NewClient does not migrate it: call
	// its Migrate first.
	Store store.Store
	// Workers are the kinds the client runs. Nil for a client that only
	// inserts (and cancels); such a client can Start only to insert its
	// Periodic jobs, and then runs no job.
	Workers *Workers
	// Queues are the queues the client works, each with its limit.
	// Default {"default": {MaxWorkers: 10}}. Every registered kind's queue
	// must be among them. A client runs every job it claims from its
	// queues: a job whose kind has no worker is abandoned (non_retryable),
	// so every process that works a queue must register all of its kinds.
	Queues map[string]QueueConfig
	// ID is this process's owner id: it holds the leases of the jobs it
	// runs. Keep it stable across restarts (a pod or host name), since at
	// Start the client takes back at once the jobs a previous run with the
	// same ID left running (their attempt counts), instead of waiting for
	// their leases to expire. Two processes running at the same time
	// must have different IDs. Default hostname-pid, which is unique but
	// not stable.
	ID string
	// LeaseFor is how long a claimed job's lease lasts before a heartbeat
	// must extend it. Default 1 min.
	LeaseFor time.Duration
	// HeartbeatEvery is how often the leases of running jobs are
	// extended. Default LeaseFor/3; must be less than LeaseFor.
	HeartbeatEvery time.Duration
	// PollEvery is how often an idle queue looks for jobs that became due
	// (retries, scheduled jobs, inserts by other processes). An Insert
	// through this client wakes its queue at once. A busy queue claims
	// from where its last claim began (store.ClaimParams.From), and from
	// the head of the queue at least every PollEvery: a job ordered
	// before that place (of a higher priority, inserted by another
	// process) waits that long at most. Default 1 s.
	PollEvery time.Duration
	// ClaimCooldown is the least time between the starts of two claims of
	// a queue when the first found it empty and an insert woke the
	// producer: inserts that come one after another are then claimed a
	// few at a time, one statement for several jobs instead of one each,
	// and a job inserted just after a claim waits up to ClaimCooldown for
	// the next. The first insert into an idle queue is claimed at once.
	// Not used in a client with a limited kind, nor on a clock other
	// than the real one. Default 25 ms; ClaimAtOnce claims as soon as an
	// insert wakes the producer.
	ClaimCooldown time.Duration
	// RescueEvery is how often expired leases (of crashed workers) are
	// rescued. Default 30 s.
	RescueEvery time.Duration
	// ShutdownTimeout is how long Stop waits for running jobs before it
	// cancels their contexts and gives them back to the queue with their
	// attempt returned. Default 30 s.
	ShutdownTimeout time.Duration
	// CompleteWithin is how long a success may wait to be written with
	// the other successes of the jobs claimed with it (up to 100 a
	// statement), while they still run, after a claim that emptied the
	// queue: the jobs a claim took together are completed together, one
	// write for the claim instead of one per job. A job claimed alone,
	// and the last of a claim to end, waits for no other job; after a claim
	// that took all it asked for (more jobs waiting) none waits for the
	// rest of its claim. With a store that writes
	// completions with a claim (store.CompletingClaimer: both of weir's),
	// a success also waits, while its queue's producer is in its
	// ClaimCooldown, for the claim that ends it, and rides with that
	// claim: one commit for both instead of two (when no claim comes, it
	// is written once the cooldown is over, or 5 ms after it when a wake
	// came during it); and, after a claim that took all it asked for,
	// up to CompleteWithin for the producer's next claim, which comes as
	// soon as the workers took a batch of the jobs claimed ahead (four
	// workers on jobs of a millisecond: a claim every few milliseconds,
	// each writing the successes since the last). Until its success is
	// written a job stays running in the store (what reads its state
	// sees it so).
	// Not used in a client with a limited kind, where a limit counts a
	// job until its end is written, nor on a clock other than the real
	// one. Default 10 ms; CompleteAtOnce writes each success as soon as
	// the completer is free.
	CompleteWithin time.Duration
	// Clock is the time source of every decision and timer. Default
	// clock.Real.
	Clock clock.Clock
	// Logger receives the client's logs, with the keys job_id, kind,
	// attempt and err. Default slog.Default().
	Logger *slog.Logger
	// Periodic are the jobs the client inserts at every tick of their
	// schedules once started (see PeriodicJob). Default none.
	Periodic []PeriodicJob
	// StuckAfter is how long an attempt may run before it is stuck: the
	// stuck sweep takes it back (see SweepStuck). An insert of its
	// idempotency key takes it back too, but only once no worker holds it
	// (its lease expired, its worker dead): a job whose lease heartbeats
	// keep alive is never reclaimed by an insert, whatever the inserting
	// client's StuckAfter. KindConfig.StuckAfter overrides it per kind.
	// Default 10 min.
	StuckAfter time.Duration
	// SweepEvery is how often a started client runs the stuck sweep.
	// Default 15 min.
	SweepEvery time.Duration
	// JobRetention is how long completed and cancelled jobs are kept,
	// from when they finished, before the retention sweep deletes them;
	// KindConfig.Retention overrides it per kind. Dead jobs are not
	// deleted by it: they go with their dead letters (package
	// deadletter's Retention). Default 24 h; KeepJobs keeps them. Once a
	// job is deleted its idempotency key is free again: an insert of the
	// key makes a new job.
	JobRetention time.Duration
	// RetentionEvery is how often a started client with workers runs the
	// retention sweep (see SweepRetention); one process at a time does,
	// the one holding the store's retention lease. Default 1 min.
	RetentionEvery time.Duration
	// Metrics, when set, receives the client's counters and latencies:
	// a *metrics.Metrics of package github.com/weirhq/weir/metrics, which
	// exports them to Prometheus, or any other Metrics. Default none.
	Metrics Metrics
	// TracerProvider, when set, makes an OpenTelemetry span of each job
	// attempt ("weir.job <kind>", with the job's id, kind, queue and
	// attempt; its error recorded). Default none: no spans.
	TracerProvider trace.TracerProvider
}

// withDefaults returns c with its defaults, or an error naming the bad
// field.
func (c Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("weir: Config."+format, args...)
	}
	if c.Store == nil {
		return bad("Store is nil")
	}
	if len(c.Queues) == 0 {
		c.Queues = map[string]QueueConfig{DefaultQueue: {MaxWorkers: DefaultMaxWorkers}}
	} else {
		c.Queues = maps.Clone(c.Queues)
	}
	for name, q := range c.Queues {
		switch {
		case name == "":
			return bad("Queues has an empty queue name")
		case q.MaxWorkers < 0:
			return bad("Queues[%q].MaxWorkers %d is negative", name, q.MaxWorkers)
		case q.MaxWorkers == 0:
			q.MaxWorkers = DefaultMaxWorkers
			c.Queues[name] = q
		}
	}
	if c.ID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "weir"
		}
		c.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"LeaseFor", &c.LeaseFor, DefaultLeaseFor},
		{"HeartbeatEvery", &c.HeartbeatEvery, 0}, // default LeaseFor/3, below
		{"PollEvery", &c.PollEvery, DefaultPollEvery},
		{"RescueEvery", &c.RescueEvery, DefaultRescueEvery},
		{"ShutdownTimeout", &c.ShutdownTimeout, DefaultShutdownTimeout},
		{"StuckAfter", &c.StuckAfter, DefaultStuckAfter},
		{"SweepEvery", &c.SweepEvery, DefaultSweepEvery},
		{"JobRetention", &c.JobRetention, DefaultJobRetention},
		{"RetentionEvery", &c.RetentionEvery, DefaultRetentionEvery},
		{"CompleteWithin", &c.CompleteWithin, DefaultCompleteWithin},
		{"ClaimCooldown", &c.ClaimCooldown, DefaultClaimCooldown},
	} {
		if *d.v < 0 {
			return bad("%s %v is negative", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.HeartbeatEvery == 0 {
		c.HeartbeatEvery = c.LeaseFor / 3
	}
	if c.HeartbeatEvery <= 0 || c.HeartbeatEvery >= c.LeaseFor {
		return bad("HeartbeatEvery %v must be positive and less than LeaseFor %v", c.HeartbeatEvery, c.LeaseFor)
	}
	c.Clock = clock.Or(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
	return c, nil
}

// Client inserts jobs and, once started, runs them: a producer per queue
// claims jobs up to its free worker slots and runs each in a goroutine of
// its own, a heartbeat extends the leases of running jobs, and a rescuer
// puts back the jobs of workers whose leases expired. After a claim that
// failed (a connection cut after the claim committed, its reply lost),
// the client gives back at once, their attempts returned, the jobs the
// store says it holds and it does not run (store.Executor's
// ReleaseOwnedExcept), rather than leave them to the rescue a lease
// later. It is safe for concurrent use.
type Client struct {
	cfg   Config
	ex    engineStore
	kinds map[string]*registration
	// limits are the kinds' MaxRunning and Rate by key, and unlimited
	// the kinds with neither, which Start records in the store.
	limits    []store.LimitParams
	unlimited []string
	clock     clock.Clock
	// realTime: the clock is the real one, whose durations the producers'
	// and the completer's timing heuristics may use (a fake clock's jumps
	// are no durations).
	realTime bool
	log      *slog.Logger
	tracer   trace.Tracer

	producers map[string]*producer
	periodic  []*periodicJob
	completer *completer
	// completingClaimer is the store's Executor when it can write
	// completions with a claim (store.CompletingClaimer), nil otherwise.
	completingClaimer store.CompletingClaimer

	// jobsCtx is the parent of every running job's context; it is
	// cancelled, with cause errStopping, when Stop runs out of time.
	jobsCtx    context.Context
	cancelJobs context.CancelCauseFunc
	// loopsCtx bounds the store calls of the client's loops (Claim,
	// Heartbeat, RescueExpired, CompleteMany); it is cancelled when Stop's
	// context ends before the shutdown is done.
	loopsCtx    context.Context
	cancelLoops context.CancelFunc

	mu      sync.Mutex
	state   int // stateNew, stateStarting, stateStarted, stateStopping
	running map[int64]*runningJob

	// claimMu is held for reading by each claim until what it claimed is
	// among the running jobs, and for writing by releaseStrays; strays is
	// set when a claim failed, until releaseStrays has given back the jobs
	// such a claim may have taken (see releaseStrays). claimMu comes
	// before mu.
	claimMu sync.RWMutex
	// limitedClaims makes the claims of a client with a limited kind one
	// at a time: on PostgreSQL a claim that finds a limit's key held by
	// another gets no room from it, and two producers of one client
	// claiming at once would leave one of them short while the limit has
	// room, waiting for the next wake or poll.
	limitedClaims sync.Mutex
	strays        atomic.Bool

	// holds are the pauses this client wrote for its kinds (holdAfter),
	// with their ends, so that a burst of failures writes one.
	holdsMu sync.Mutex
	holds   map[holdKey]time.Time

	stopping    chan struct{} // closed when Stop begins: producers exit
	jobsStopped chan struct{} // closed when the running jobs are done: the completer writes what it holds and exits
	loopsStop   chan struct{} // closed when the running jobs are done: heartbeat and rescue exit
	stopped     chan struct{} // closed when Stop has finished
	stopErr     error
	producersWG sync.WaitGroup
	periodicWG  sync.WaitGroup
	jobsWG      sync.WaitGroup
	handlers    atomic.Int64 // workers still running (jobsWG's count)
	loopsWG     sync.WaitGroup
}

// engineStore is the store's part that a client uses: its jobs, their
// leases, their deadlines and late results, the stuck sweep and the
// dead-letter store (not the outbox, inbox, workflows or ledger).
type engineStore interface {
	store.Jobs
	store.Leases
	store.Results
	store.Retention
	store.Deadlines
	store.Sweep
	store.DeadLetters
	store.Pauses
	store.Limits
}

const (
	stateNew      = iota
	stateStarting // Start is taking back the jobs of a previous run
	stateStarted
	stateStopping // Stop has begun: nothing starts any more
)

// runningJob is a job this client is running.
type runningJob struct {
	lease  store.Lease
	cancel context.CancelCauseFunc
	// extended is when the lease was last extended (claimed, then each
	// successful heartbeat), on the client's clock: the lease lasts until
	// extended + LeaseFor.
	extended time.Time
	// lapsed is set once the lease has passed locally: the attempt was
	// cancelled and is no longer heartbeated.
	lapsed bool
	// superseded is set when the job was claimed again, by this client,
	// for a later attempt, or taken back by this client's stuck sweep: the
	// attempt is cancelled and may write nothing. (After a requeue from
	// the dead-letter store the new attempt's lease can equal this one's,
	// so the store alone cannot tell them apart.)
	superseded atomic.Bool
	// results are what the attempt's worker recorded for its success
	// (SetOutput).
	results results
	// group holds the attempts claimed with this one.
	group *claimGroup
	// ended is set once the attempt's handler has returned: a lease lost
	// after it is found by the write of its outcome, which says what
	// became of the job, and a heartbeat cancels nothing. (A success
	// queued keeps its lease by the heartbeats until it is written; a
	// heartbeat that crosses the write finds the job completed, and no
	// longer held.)
	ended atomic.Bool
}

// NewClient checks cfg, fills its defaults and returns a client. It does
// not touch the database; the store must be migrated (Store.Migrate)
// before the client is used.
func NewClient(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	kinds := map[string]*registration{}
	if cfg.Workers != nil {
		kinds = maps.Clone(cfg.Workers.kinds)
	}
	for kind, r := range kinds {
		if _, ok := cfg.Queues[r.cfg.Queue]; !ok {
			return nil, fmt.Errorf("weir: kind %q uses queue %q, which Config.Queues does not name", kind, r.cfg.Queue)
		}
	}
	limits, unlimited, err := kindLimits(kinds)
	if err != nil {
		return nil, err
	}
	c := &Client{
		limits:      limits,
		unlimited:   unlimited,
		cfg:         cfg,
		ex:          cfg.Store.Executor(),
		kinds:       kinds,
		clock:       cfg.Clock,
		realTime:    cfg.Clock == clock.Real,
		log:         cfg.Logger,
		tracer:      tracing.Tracer(cfg.TracerProvider),
		producers:   map[string]*producer{},
		running:     map[int64]*runningJob{},
		holds:       map[holdKey]time.Time{},
		stopping:    make(chan struct{}),
		jobsStopped: make(chan struct{}),
		loopsStop:   make(chan struct{}),
		stopped:     make(chan struct{}),
	}
	if c.periodic, err = c.newPeriodic(cfg.Periodic); err != nil {
		return nil, err
	}
	c.jobsCtx, c.cancelJobs = context.WithCancelCause(context.Background())
	c.loopsCtx, c.cancelLoops = context.WithCancel(context.Background())
	workers := 0
	for _, q := range cfg.Queues {
		workers += q.MaxWorkers
	}
	c.completer = newCompleter(workers)
	c.completingClaimer, _ = c.ex.(store.CompletingClaimer)
	for name, q := range cfg.Queues {
		c.producers[name] = &producer{
			queue:  name,
			max:    q.MaxWorkers,
			wake:   make(chan struct{}, 1),
			done:   make(chan struct{}, q.MaxWorkers),
			ready:  make(chan *claimedJob, readyCap(q.MaxWorkers)),
			refill: make(chan struct{}, 1),
		}
	}
	return c, nil
}

// limited reports whether a kind of the client has a MaxRunning or a Rate.
// A limited kind may be inserted in any queue (InsertOpts.Queue), and kinds
// of several queues may share a limit, so then every queue's claim may
// come back short while jobs wait, and an attempt that ends in any queue
// may give room to another.
func (c *Client) limited() bool { return len(c.limits) > 0 }

// ID returns the client's owner id (Config.ID or its default).
func (c *Client) ID() string { return c.cfg.ID }

// Start takes back the jobs a previous run with the same ID left running
// (ReleaseOwned, the attempt counted), then starts working the queues in
// goroutines of its own, with a goroutine per periodic job, and returns.
// ctx bounds Start's own work only: the client runs until Stop. Start
// fails for a client without workers or periodic jobs, when called twice,
// and once Stop has begun (a Stop during Start makes Start return an error
// having started nothing). A client with periodic jobs and no workers only
// inserts them.
func (c *Client) Start(ctx context.Context) error {
	if len(c.kinds) == 0 && len(c.periodic) == 0 {
		return errors.New("weir: Start: no workers registered (a client that only inserts need not start)")
	}
	c.mu.Lock()
	switch c.state {
	case stateNew:
	case stateStopping:
		c.mu.Unlock()
		return errStartAfterStop
	default:
		c.mu.Unlock()
		return errors.New("weir: Start: the client was started already")
	}
	c.state = stateStarting
	c.mu.Unlock()

	released, err := c.ex.ReleaseOwned(ctx, c.clock.Now(), c.cfg.ID, false)
	if err != nil {
		err = fmt.Errorf("weir: Start: take back the jobs of %s: %w", c.cfg.ID, err)
	} else {
		err = c.applyLimits(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateStopping {
		// Stop began meanwhile and waits for this: start nothing.
		close(c.stopped)
		if err != nil {
			return err
		}
		return errStartAfterStop
	}
	if err != nil {
		c.state = stateNew
		return err
	}
	if len(released) > 0 {
		c.log.Info("took back the jobs a previous run left running", "owner", c.cfg.ID, "jobs", len(released))
	}
	// The goroutines start under c.mu, so that Stop, which needs it to
	// begin, never waits on a WaitGroup that may still grow.
	c.state = stateStarted
	go c.completer.run(c, c.jobsStopped)
	if len(c.kinds) > 0 {
		for _, p := range c.producers {
			c.producersWG.Add(1)
			go c.produce(p)
		}
		c.loopsWG.Add(3)
		go c.heartbeatLoop()
		go c.rescueLoop()
		go c.sweepLoop()
		c.loopsWG.Add(1)
		go c.retentionLoop()
		if n, ok := c.cfg.Store.(store.Notifier); ok && c.cfg.Store.Features().Notify {
			c.loopsWG.Add(1)
			go c.listenLoop(n)
		}
	}
	now := c.clock.Now()
	for _, p := range c.periodic {
		c.periodicWG.Add(1)
		go c.runPeriodic(p, now)
	}
	return nil
}

// Stop stops claiming jobs and waits for the running ones to finish, up
// to Config.ShutdownTimeout or until ctx ends; then it cancels the
// contexts of those still running, waits for their workers to return
// (until ctx ends) and gives their jobs back to the queue with the
// attempt returned (ReleaseOwned with giveBack). A worker that returns an
// error after its context was cancelled for the shutdown records nothing:
// its job is simply given back. If ctx ends first (workers still running,
// the last completions not yet written, a store call of a loop blocked),
// Stop cancels the jobs and the loops' store calls and returns an error
// wrapping ctx's at once; the shutdown then finishes on its own, and a
// later Stop waits for it. It is safe to call twice, and before Start;
// once Stop has begun, Start fails. A Stop during Start waits for Start,
// which then starts nothing.
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	switch c.state {
	case stateNew:
		c.state = stateStopping
		c.mu.Unlock()
		close(c.stopped)
		return nil
	case stateStarting:
		c.state = stateStopping // Start sees it, starts nothing and closes stopped
	case stateStarted:
		c.state = stateStopping
		c.mu.Unlock()
		go func() {
			c.stopErr = c.stop(ctx)
			close(c.stopped)
		}()
		select {
		case <-c.stopped:
			return c.stopErr
		case <-ctx.Done():
			// Give up: interrupt what the shutdown waits for, and let it
			// finish on its own.
			c.cancelJobs(errStopping)
			c.cancelLoops()
			return fmt.Errorf("weir: Stop: shutdown not done: %w", ctx.Err())
		}
	}
	c.mu.Unlock()
	select {
	case <-c.stopped:
		return c.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) stop(ctx context.Context) error {
	defer c.cancelLoops()
	close(c.stopping)
	c.producersWG.Wait()
	ahead := 0
	for _, p := range c.producers {
		ahead += c.dropAhead(p)
	}
	if ahead > 0 {
		c.log.Info("stopping: jobs claimed ahead are given back at the end, not run", "jobs", ahead)
	}
	c.periodicWG.Wait()
	c.mu.Lock()
	n := len(c.running)
	c.mu.Unlock()
	c.log.Info("stopping: waiting for the running jobs", "jobs", n, "timeout", c.cfg.ShutdownTimeout)

	jobsDone := make(chan struct{})
	go func() {
		c.jobsWG.Wait()
		close(jobsDone)
	}()
	var err error
	t := c.clock.NewTimer(c.cfg.ShutdownTimeout)
	select {
	case <-jobsDone:
		t.Stop()
	case <-t.C():
	case <-ctx.Done():
		t.Stop()
	}
	select {
	case <-jobsDone:
	default:
		c.log.Warn("shutdown: cancelling the jobs still running", "timeout", c.cfg.ShutdownTimeout)
		c.cancelJobs(errStopping)
		select {
		case <-jobsDone:
		case <-ctx.Done():
			if c.handlers.Load() > 0 {
				err = fmt.Errorf("weir: Stop: workers still running: %w", ctx.Err())
			} else {
				<-jobsDone // every worker has returned: jobsWG is about to reach zero
			}
		}
	}
	// The completions of the jobs that succeeded are written before
	// anything is given back, and while heartbeats still keep their
	// leases.
	close(c.jobsStopped)
	<-c.completer.done
	close(c.loopsStop)
	c.loopsWG.Wait()
	c.cancelJobs(errStopping)

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	released, rerr := c.ex.ReleaseOwned(rctx, c.clock.Now(), c.cfg.ID, true)
	if rerr != nil {
		return errors.Join(err, fmt.Errorf("weir: Stop: give back the jobs still held: %w", rerr))
	}
	if len(released) > 0 {
		c.log.Info("shutdown: gave back the jobs still running", "jobs", len(released))
	}
	return err
}

// InsertOpts are the options of one insert. A nil *InsertOpts takes every
// default.
type InsertOpts struct {
	// IdempotencyKey, when set, makes the insert find the job with the
	// same key instead of making a second one; the result's Outcome says
	// what it found (see weirtype.InsertOutcome).
	IdempotencyKey string
	// Source says where the job came from, for operators.
	Source string
	// Priority orders available jobs: higher first. Default 0.
	Priority int
	// ScheduledAt is when the job may first run. Default now.
	ScheduledAt time.Time
	// DeadlineAt is the job's deadline (see KindConfig.SLA, which it
	// overrides). Default none, or the insert's time plus the kind's SLA.
	DeadlineAt time.Time
	// Queue overrides the kind's KindConfig.Queue.
	Queue string
	// MaxAttempts overrides the kind's KindConfig.MaxAttempts.
	MaxAttempts int
}

// InsertManyParams is one job of InsertMany.
type InsertManyParams struct {
	Args JobArgs
	Opts *InsertOpts
}

// Insert inserts a job of args' kind, its payload args encoded as JSON,
// and wakes this client's producer of its queue. The kind's queue and max
// attempts come from its KindConfig when the kind is registered with this
// client, and from the store's defaults otherwise (a client may insert
// kinds that other processes work).
func (c *Client) Insert(ctx context.Context, args JobArgs, opts *InsertOpts) (weirtype.InsertResult, error) {
	rs, err := c.insert(ctx, c.ex, []InsertManyParams{{Args: args, Opts: opts}}, true)
	if err != nil {
		return weirtype.InsertResult{}, err
	}
	return rs[0], nil
}

// InsertTx inserts a job as Insert does, through ex: an Executor bound to
// the caller's transaction (sqlite.Store.Tx, postgres.Store.Tx), so that
// the job and the caller's data commit or roll back together. The job
// becomes visible at the commit, which this client cannot see: on
// PostgreSQL the commit's notification wakes the producers of every client
// (LISTEN/NOTIFY); on SQLite they find it at their next poll
// (Config.PollEvery).
func (c *Client) InsertTx(ctx context.Context, ex store.Jobs, args JobArgs, opts *InsertOpts) (weirtype.InsertResult, error) {
	if ex == nil {
		return weirtype.InsertResult{}, errors.New("weir: InsertTx: the executor is nil")
	}
	rs, err := c.insert(ctx, ex, []InsertManyParams{{Args: args, Opts: opts}}, false)
	if err != nil {
		return weirtype.InsertResult{}, err
	}
	return rs[0], nil
}

// InsertMany inserts the jobs in one transaction, all or none, and returns
// their results in order.
func (c *Client) InsertMany(ctx context.Context, params []InsertManyParams) ([]weirtype.InsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	return c.insert(ctx, c.ex, params, true)
}

func (c *Client) insert(ctx context.Context, ex store.Jobs, params []InsertManyParams, wake bool) ([]weirtype.InsertResult, error) {
	now := c.clock.Now()
	ps := make([]store.InsertParams, len(params))
	for i, p := range params {
		ip, err := c.insertParams(now, p.Args, p.Opts)
		if err != nil {
			return nil, err
		}
		ps[i] = ip
	}
	rs, err := ex.Insert(ctx, now, ps)
	if err != nil {
		return nil, fmt.Errorf("weir: insert: %w", err)
	}
	for _, r := range rs {
		c.cfg.Metrics.Enqueued(r.Job.Kind, r.Job.Queue, r.Outcome)
		if wake && r.Outcome.Runs() {
			c.wake(r.Job.Queue)
		}
	}
	return rs, nil
}

func (c *Client) insertParams(now time.Time, args JobArgs, opts *InsertOpts) (store.InsertParams, error) {
	if args == nil {
		return store.InsertParams{}, errors.New("weir: insert: args is nil")
	}
	kind := args.Kind()
	payload, err := json.Marshal(args)
	if err != nil {
		return store.InsertParams{}, fmt.Errorf("weir: insert: encode the args of kind %q: %w", kind, err)
	}
	if opts == nil {
		opts = &InsertOpts{}
	}
	p := store.InsertParams{
		Kind: kind, Payload: payload, Queue: opts.Queue, MaxAttempts: opts.MaxAttempts,
		IdempotencyKey: opts.IdempotencyKey, Source: opts.Source, Priority: opts.Priority,
		ScheduledAt: opts.ScheduledAt, DeadlineAt: opts.DeadlineAt,
	}
	if r, ok := c.kinds[kind]; ok {
		if p.Queue == "" {
			p.Queue = r.cfg.Queue
		}
		if p.MaxAttempts == 0 {
			p.MaxAttempts = r.cfg.MaxAttempts
		}
		if p.DeadlineAt.IsZero() && r.cfg.SLA > 0 {
			p.DeadlineAt = now.Add(r.cfg.SLA)
		}
	}
	p.StuckAfter = c.stuckAfter(kind)
	return p, nil
}

// Cancel cancels the job: a waiting job never runs, and a running one's
// worker, in this process, has its context cancelled at once (in another
// process, at its next heartbeat); what it returns is not recorded. It
// returns the cancelled job, or an error wrapping store.ErrFinal for a job
// that is completed, cancelled or dead, or store.ErrNotFound.
func (c *Client) Cancel(ctx context.Context, id int64) (*weirtype.Job, error) {
	j, err := c.ex.Cancel(ctx, c.clock.Now(), id)
	if err != nil {
		return nil, fmt.Errorf("weir: cancel: %w", err)
	}
	c.mu.Lock()
	r := c.running[id]
	c.mu.Unlock()
	if r != nil {
		r.cancel(errCancelled)
	}
	return j, nil
}
