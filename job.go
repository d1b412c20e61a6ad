package weir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// JobArgs is a job kind's arguments. A kind is a Go type: its Kind method
// names it (the name is stored with every job, so keep it stable), and its
// value, encoded with encoding/json, is the job's payload. Kind must work on
// the type's zero value, because the registry calls it on one.
type JobArgs interface {
	Kind() string
}

// Job is a job handed to a worker: the stored row and its decoded
// arguments.
type Job[T JobArgs] struct {
	*weirtype.Job
	Args T
}

// Worker runs the jobs of one kind. Work's error decides what happens next:
//
//   - nil: the job is completed;
//   - an error made by [JobSnooze]: the job runs again after the snooze,
//     without using an attempt;
//   - an error marked with [retry.Permanent]: the job is abandoned to the
//     dead-letter store at once, reason non_retryable;
//   - any other error (or a panic, recovered as a [*PanicError]): the
//     attempt failed and the job is retried after its kind's backoff,
//     raised to the error's [retry.After] hint in full (never sooner than
//     the hint, whatever the backoff's cap), unless its attempts are
//     spent (max_attempts_exceeded), the retry would pass its TTL
//     (ttl_exceeded) or deadline (deadline_exceeded), or the hint is
//     longer than the kind's MaxRetryAfter (the job is abandoned at once).
//
// Work must return soon after ctx ends: on the client's Stop, on the kind's
// Timeout, when the job is cancelled and when the worker loses the job's
// lease. context.Cause(ctx) says which.
type Worker[T JobArgs] interface {
	Work(ctx context.Context, job *Job[T]) error
}

type workFunc[T JobArgs] func(context.Context, *Job[T]) error

func (f workFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

// WorkFunc makes a Worker of a function.
func WorkFunc[T JobArgs](f func(context.Context, *Job[T]) error) Worker[T] {
	return workFunc[T](f)
}

// Defaults of KindConfig.
const (
	// DefaultMaxAttempts is KindConfig.MaxAttempts's default.
	DefaultMaxAttempts = store.DefaultMaxAttempts
	// DefaultQueue is KindConfig.Queue's default.
	DefaultQueue = store.DefaultQueue
	// DefaultMaxRetryAfter is KindConfig.MaxRetryAfter's default.
	DefaultMaxRetryAfter = 24 * time.Hour
)

// KindConfig is the policy of one job kind. Its zero value works.
type KindConfig struct {
	// MaxAttempts is how many attempts a job of the kind gets; it is
	// stored with each job when it is inserted (InsertOpts.MaxAttempts
	// overrides it). Default 25.
	MaxAttempts int
	// Backoff is the wait before each retry. The zero value is
	// backoff's default: exponential from 1 s, factor 2, capped at 60 s,
	// ±20% jitter. Spec 04's 5 min ×2 capped at 60 min is
	// backoff.Exponential(5*time.Minute, 2, time.Hour). A handler's
	// retry.After hint raises the wait to the hint, in full, past the
	// backoff's Cap (see MaxRetryAfter).
	Backoff backoff.Backoff
	// MaxRetryAfter is the longest retry-after hint (retry.After, a
	// server's Retry-After) a job of the kind waits for: the job is never
	// retried before its hint, so a longer hint abandons it at once to
	// the dead-letter store instead, as does a hint that would pass its
	// TTL (ttl_exceeded) or deadline (deadline_exceeded). A retry waits
	// in the store, not in memory, so the default is long: 24 h.
	MaxRetryAfter time.Duration
	// TTL is how long a job may keep trying, from its CreatedAt (or from
	// its latest requeue out of the dead-letter store): a retry that would
	// start after that plus TTL is not scheduled, and the job is abandoned
	// with reason ttl_exceeded instead. 0 means no TTL.
	TTL time.Duration
	// Retention is how long the kind's completed and cancelled jobs are
	// kept once finished; 0 takes Config.JobRetention (24 h by default),
	// KeepJobs keeps them. See Config.JobRetention.
	Retention time.Duration
	// Timeout bounds each attempt: the handler's context ends then, with
	// a *TimeoutError as its cause, and the attempt counts as failed.
	// 0 means none (the lease still bounds an attempt whose process dies).
	Timeout time.Duration
	// Queue is the queue the kind's jobs are inserted in (InsertOpts.Queue
	// overrides it). The client must work that queue (Config.Queues).
	// Default "default".
	Queue string
	// SLA is how long after its insert a job of the kind must be done:
	// the job's DeadlineAt is set to the insert's time plus SLA
	// (InsertOpts.DeadlineAt overrides it). Past it an unfinished job is
	// abandoned with reason deadline_exceeded: a running attempt's context
	// ends with a *DeadlineError cause, a waiting job is abandoned by the
	// deadline sweep, and a retry that would start after the deadline is
	// not scheduled. An attempt that succeeds after the deadline is
	// stored as a late result (see Client.AcceptLateResult). 0 means none.
	// Spec 03's writing and speaking SLAs are 20 and 60 minutes.
	SLA time.Duration
	// StuckAfter is how long an attempt of the kind may run before the
	// stuck sweep of a client that registers the kind takes it back as
	// stuck (an insert of its idempotency key takes it back only once its
	// lease has expired, past the inserting client's threshold). Default
	// Config.StuckAfter (10 min); raise it for kinds whose attempts
	// legitimately run longer.
	StuckAfter time.Duration
	// Breaker, when set, is the circuit breaker through which the kind's
	// worker calls its dependency (a *breaker.Breaker). While it is open
	// the kind is paused in the store, so that no process claims its jobs
	// (they keep their attempts); at the breaker's next probe time one
	// job is claimed, by one process, as the probe: its success resumes
	// the kind, while its failure, or no end, holds it another open
	// period. A job whose call the breaker refuses (breaker.ErrOpen) is
	// snoozed until the next probe, its attempt given back. Default none.
	Breaker KindBreaker
	// RateLimitKey, when set, names the rate limit the kind's calls count
	// against: when an attempt's error carries a retry-after hint (a
	// 429's Retry-After, retry.After), every kind of the client naming
	// the same key is held in the store until the hint has passed (at
	// most MaxRetryAfter), so that no process claims their jobs before
	// the server allows. Every process working those kinds must name the
	// key alike. Default none: a hint delays only its own job. The key
	// also groups the kind's MaxRunning and Rate limits with those of the
	// other kinds naming it.
	RateLimitKey string
	// MaxRunning is how many attempts of the kind (with every kind of its
	// RateLimitKey, if it names one) may run at once across every process
	// that shares the store: the claim in the store counts them, so no
	// process takes more than the rest leave. 0 means no such limit.
	MaxRunning int
	// Rate is how many attempts of the kind (with every kind of its
	// RateLimitKey) may start per interval across every process: at most
	// Rate.N in each window of Rate.Per, the windows aligned to the clock
	// (a 1-minute rate counts from each minute's start). Starts count
	// retries. The zero value means no such limit.
	//
	// The client records MaxRunning and Rate in the store at Start (and
	// removes the limits of its kinds that name none), so that every
	// process obeys them; kinds sharing a RateLimitKey must give the same
	// limits, and every process working them the same.
	Rate Rate
}

// Rate is a rate limit: at most N starts in each window of Per.
type Rate struct {
	N   int
	Per time.Duration
}

// normalized returns c with its defaults, or an error naming the bad field.
func (c KindConfig) normalized(kind string) (KindConfig, error) {
	bad := func(format string, args ...any) (KindConfig, error) {
		return c, fmt.Errorf("weir: AddWorker: kind %q: KindConfig."+format, append([]any{kind}, args...)...)
	}
	switch {
	case c.MaxAttempts < 0:
		return bad("MaxAttempts %d is negative", c.MaxAttempts)
	case c.TTL < 0:
		return bad("TTL %v is negative", c.TTL)
	case c.Timeout < 0:
		return bad("Timeout %v is negative", c.Timeout)
	case c.SLA < 0:
		return bad("SLA %v is negative", c.SLA)
	case c.StuckAfter < 0:
		return bad("StuckAfter %v is negative", c.StuckAfter)
	case c.MaxRetryAfter < 0:
		return bad("MaxRetryAfter %v is negative", c.MaxRetryAfter)
	case c.Retention < 0:
		return bad("Retention %v is negative (KeepJobs keeps the kind's jobs)", c.Retention)
	case c.MaxRunning < 0:
		return bad("MaxRunning %d is negative", c.MaxRunning)
	}
	if c.MaxRunning > 0 || c.Rate != (Rate{}) {
		if _, err := c.limit(kind).Normalize(); err != nil {
			return bad("MaxRunning %d, Rate %d per %v: %w", c.MaxRunning, c.Rate.N, c.Rate.Per, err)
		}
	}
	if err := c.Backoff.Validate(); err != nil {
		return bad("Backoff: %w", err)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Queue == "" {
		c.Queue = DefaultQueue
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = DefaultMaxRetryAfter
	}
	c.Backoff = c.Backoff.Normalized()
	return c, nil
}

// Workers is the registry of the kinds a client works: one worker and one
// KindConfig per kind. Build it with AddWorker, then pass it to NewClient,
// which copies it: later additions do not reach that client. It is not
// safe for concurrent use.
type Workers struct {
	kinds map[string]*registration
}

// registration is one kind's worker, type-erased, and its policy.
type registration struct {
	cfg  KindConfig
	work func(ctx context.Context, j *weirtype.Job) error
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers {
	return &Workers{kinds: map[string]*registration{}}
}

// AddWorker registers worker for the kind of T with its policy. It returns
// an error when the kind is empty or registered already, or when cfg has a
// bad value.
func AddWorker[T JobArgs](w *Workers, worker Worker[T], cfg KindConfig) error {
	if w == nil || w.kinds == nil {
		return errors.New("weir: AddWorker: the registry is nil; make it with NewWorkers")
	}
	if worker == nil {
		return errors.New("weir: AddWorker: the worker is nil")
	}
	var zero T
	kind := zero.Kind()
	if kind == "" {
		return fmt.Errorf("weir: AddWorker: %T.Kind() is empty", zero)
	}
	if _, dup := w.kinds[kind]; dup {
		return fmt.Errorf("weir: AddWorker: kind %q is registered already", kind)
	}
	cfg, err := cfg.normalized(kind)
	if err != nil {
		return err
	}
	w.kinds[kind] = &registration{cfg: cfg, work: func(ctx context.Context, j *weirtype.Job) error {
		var args T
		if err := json.Unmarshal(j.Payload, &args); err != nil {
			return retry.Permanent(fmt.Errorf("weir: decode the payload of job %d as %T: %w", j.ID, args, err))
		}
		return worker.Work(ctx, &Job[T]{Job: j, Args: args})
	}}
	return nil
}
