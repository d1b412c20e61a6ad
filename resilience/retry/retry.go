package retry

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/defaults"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/budget"
)

// DefaultMaxAttempts is one attempt and five retries, as weir's resilience
// spec asks for calls to rate-limited APIs.
const DefaultMaxAttempts = 6

// DefaultMaxRetryAfter is the longest retry-after hint a policy waits for
// unless Config.MaxRetryAfter says otherwise: 10 minutes.
const DefaultMaxRetryAfter = 10 * time.Minute

// Config configures a Policy. The zero value works: six attempts, the
// default backoff (1 s doubling to 60 s, ±20%), no TTL, retry-after hints
// honoured up to 10 minutes, every error retryable unless marked Permanent.
type Config struct {
	// MaxAttempts is the number of attempts in all, the first included.
	// Default 6. Must not be negative.
	MaxAttempts int
	// TTL is the total time allowed from the start of the first attempt.
	// The policy gives up rather than start a wait that would end past it.
	// Zero means no TTL.
	TTL time.Duration
	// Backoff is the wait between attempts. The zero value is the default
	// backoff. A retry-after hint longer than the backoff's wait (even
	// longer than its Cap) replaces it.
	Backoff backoff.Backoff
	// MaxRetryAfter is the longest retry-after hint (see After) the policy
	// waits for. An error whose hint is longer, and longer than the
	// backoff's own wait (which would honour it anyway), ends the policy at
	// once with reason retry_after_exceeds_limit: weir never calls again
	// before the server allows, and does not wait longer than this for it.
	// Default 10 minutes (DefaultMaxRetryAfter). Must not be negative.
	MaxRetryAfter time.Duration
	// Retryable classifies an error the function returned. Default
	// IsRetryable: every error but a Permanent one. The caller's own
	// context ending is never retried, whatever Retryable says.
	Retryable func(error) bool
	// Budget, when set, must allow each retry; it is shared between
	// policies that call the same dependency.
	Budget *budget.Budget
	// OnRetry, when set, is called before each wait.
	OnRetry func(Event)
	// Logger, when set, logs each retry at Info and giving up at Warn.
	Logger *slog.Logger
	// Clock is the source of time. Default clock.Real.
	Clock clock.Clock
	// Rand returns uniform numbers in [0, 1) for jitter. Default
	// math/rand/v2's Float64.
	Rand func() float64
}

// Event describes a retry about to wait.
type Event struct {
	// Attempt is the number of the attempt that just failed, from 1.
	Attempt int
	// Err is the error it returned.
	Err error
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// Elapsed is the time since the first attempt started.
	Elapsed time.Duration
}

// IsRetryable is the default classifier: every error is retryable unless it
// is marked Permanent.
func IsRetryable(err error) bool { return !IsPermanent(err) }

// Policy runs functions with retries. It is safe for concurrent use; one
// Policy can serve many goroutines.
type Policy struct {
	cfg  Config
	mono func() time.Duration // the clock's cheap monotonic reading
	// wallTime is set when the policy runs on the real clock, the clock a
	// context's deadline is set on: only then is a wait compared with it.
	wallTime bool
}

// New returns a Policy, or an error naming the bad field.
func New(cfg Config) (*Policy, error) {
	if err := defaults.Set("retry: max attempts", &cfg.MaxAttempts, DefaultMaxAttempts); err != nil {
		return nil, err
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("retry: ttl %v is negative", cfg.TTL)
	}
	if err := defaults.Set("retry: MaxRetryAfter", &cfg.MaxRetryAfter, DefaultMaxRetryAfter); err != nil {
		return nil, err
	}
	if err := cfg.Backoff.Validate(); err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	cfg.Backoff = cfg.Backoff.Normalized()
	if cfg.Retryable == nil {
		cfg.Retryable = IsRetryable
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Policy{cfg: cfg, mono: clock.MonotonicOf(cfg.Clock), wallTime: cfg.Clock == clock.Real}, nil
}

// MustNew is New for configs known to be valid; it panics on a bad one.
func MustNew(cfg Config) *Policy {
	p, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return p
}

// Config returns the policy's config with its defaults filled in.
func (p *Policy) Config() Config { return p.cfg }

// Do calls fn until it returns nil or the policy gives up. It returns nil on
// success and an *Error, which unwraps to fn's last error, otherwise.
func (p *Policy) Do(ctx context.Context, fn func(context.Context) error) error {
	cfg := &p.cfg
	start := p.mono()
	// reserved is a retry slot taken from the budget and not yet given
	// back; the deferred release covers every way out, a panic included.
	reserved := false
	if cfg.Budget != nil {
		cfg.Budget.Begin()
		defer func() {
			if reserved {
				cfg.Budget.RetryDone()
			}
			cfg.Budget.End()
		}()
	}
	var (
		prev    time.Duration
		lastErr error
	)
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return p.giveUp(ReasonCancelled, attempt-1, start, lastErr, err, "context ended before attempt")
		}
		err := fn(ctx)
		if reserved {
			cfg.Budget.RetryDone()
			reserved = false
		}
		if err == nil {
			return nil
		}
		lastErr = err
		if cerr := ctx.Err(); cerr != nil {
			return p.giveUp(ReasonCancelled, attempt, start, err, cerr, "")
		}
		if !cfg.Retryable(err) {
			return p.giveUp(ReasonNonRetryable, attempt, start, err, nil, "")
		}
		if attempt >= cfg.MaxAttempts {
			return p.giveUp(ReasonMaxAttempts, attempt, start, err, nil, "")
		}
		delay, hint, hinted := p.delay(attempt, prev, err)
		if hinted && hint > cfg.MaxRetryAfter {
			e := p.giveUp(ReasonRetryAfterExceedsLimit, attempt, start, err, nil,
				fmt.Sprintf("retry-after %v is longer than the %v limit", hint, cfg.MaxRetryAfter))
			e.RetryAfter, e.MaxRetryAfter = hint, cfg.MaxRetryAfter
			return e
		}
		if e := p.tooLate(ctx, attempt, start, err, delay, hinted); e != nil {
			return e
		}
		if cfg.Budget != nil {
			if !cfg.Budget.TryRetry() {
				return p.giveUp(ReasonBudgetExhausted, attempt, start, err, nil, "retry budget refused the retry")
			}
			reserved = true
		}
		if cfg.OnRetry != nil || cfg.Logger != nil {
			p.report(ctx, Event{Attempt: attempt, Err: err, Delay: delay, Elapsed: p.mono() - start})
			// The callbacks took time of their own: look again, so that the
			// wait never ends past the TTL or the deadline.
			if e := p.tooLate(ctx, attempt, start, err, delay, hinted); e != nil {
				return e
			}
		}
		if cerr := p.wait(ctx, delay); cerr != nil {
			return p.giveUp(ReasonCancelled, attempt, start, err, cerr, "context ended during wait")
		}
		prev = delay
	}
}

// tooLate returns the error that ends the policy when a wait of delay
// would end past the TTL or past the context's deadline, nil otherwise.
func (p *Policy) tooLate(ctx context.Context, attempt int, start time.Duration, err error, delay time.Duration, hinted bool) *Error {
	what := "next wait"
	if hinted {
		what = "retry-after"
	}
	elapsed := p.mono() - start
	if ttl := p.cfg.TTL; ttl > 0 && elapsed+delay > ttl {
		left := max(ttl-elapsed, 0).Round(time.Millisecond)
		return p.giveUp(ReasonTTL, attempt, start, err, nil,
			fmt.Sprintf("%s %v would pass the %v ttl with %v left", what, delay, ttl, left))
	}
	if !p.wallTime {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); delay > left {
			return p.giveUp(ReasonDeadline, attempt, start, err, context.DeadlineExceeded,
				fmt.Sprintf("%s %v would pass the context's deadline with %v left", what, delay, max(left, 0).Round(time.Millisecond)))
		}
	}
	return nil
}

func (p *Policy) report(ctx context.Context, e Event) {
	if p.cfg.OnRetry != nil {
		p.cfg.OnRetry(e)
	}
	if p.cfg.Logger != nil {
		p.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "retrying",
			slog.Int("attempt", e.Attempt), slog.Int("max_attempts", p.cfg.MaxAttempts),
			slog.Duration("delay", e.Delay), slog.String("err", redact.String(e.Err.Error())))
	}
}

// delay is the wait after attempt: the backoff's, or the error's
// retry-after hint when that is longer, even longer than the backoff's Cap.
// hint and hinted tell the hint, whether or not it set the wait.
func (p *Policy) delay(attempt int, prev time.Duration, err error) (d, hint time.Duration, hinted bool) {
	d = p.cfg.Backoff.Delay(attempt, prev, p.cfg.Rand())
	if h, ok := AfterHint(err); ok {
		h = max(h, 0)
		return max(d, h), h, h >= d
	}
	return d, 0, false
}

func (p *Policy) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if !clock.Sleep(p.cfg.Clock, d, ctx.Done()) {
		return ctx.Err()
	}
	return nil
}

func (p *Policy) giveUp(reason Reason, attempts int, start time.Duration, last, ctxErr error, detail string) *Error {
	e := &Error{
		Reason:   reason,
		Attempts: attempts,
		Elapsed:  p.mono() - start,
		Last:     last,
		Detail:   detail,
		ctxErr:   ctxErr,
	}
	if p.cfg.Logger != nil {
		attrs := []slog.Attr{slog.String("reason", string(reason)), slog.Int("attempt", attempts),
			slog.Duration("elapsed", e.Elapsed)}
		if detail != "" {
			attrs = append(attrs, slog.String("detail", redact.String(detail)))
		}
		if last != nil {
			attrs = append(attrs, slog.String("err", redact.String(last.Error())))
		}
		p.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "retry gave up", attrs...)
	}
	return e
}
