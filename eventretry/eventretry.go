// Package eventretry handles an event whose subject may not be queryable
// yet: a downstream service receives an event about a document before the
// document can be read (eventual consistency), so the handler says so with
// NotQueryable and the event is tried again with exponential backoff and
// full jitter, until it succeeds, its attempts or its time-to-live run out,
// or it fails for another reason; then it goes to the dead-letter function
// with the original event and its diagnostics.
//
// Only errors marked NotQueryable are retried: any other error (a
// validation error, a data-integrity error, a programming error) is sent
// to the dead-letter function at once, reason non_retryable. The defaults
// are 8 attempts, 250 ms base, ×2, 60 s cap, full jitter, 30 min TTL, and
// a Config.Policy field left zero takes its default. The package reads no
// environment: the weir command maps WEIR_RETRY_MAX_ATTEMPTS,
// WEIR_RETRY_BASE_DELAY_MS, WEIR_RETRY_BACKOFF_FACTOR,
// WEIR_RETRY_MAX_DELAY_SECONDS and WEIR_RETRY_TTL_MINUTES (or the design's
// RETRY_* names of the same settings, when the WEIR_ ones are unset) onto
// Config.Policy.
package eventretry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/errtype"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

// NotQueryable marks err as "what the event points to is not queryable
// yet": the event is tried again later.
func NotQueryable(err error) error {
	if err == nil {
		return nil
	}
	return &notQueryableError{err: err}
}

// IsNotQueryable reports whether err, or an error it wraps, was marked
// with NotQueryable.
func IsNotQueryable(err error) bool {
	var nq *notQueryableError
	return errors.As(err, &nq)
}

type notQueryableError struct{ err error }

func (e *notQueryableError) Error() string { return e.err.Error() }
func (e *notQueryableError) Unwrap() error { return e.err }

// DeadLetter is an event given up on, with what an operator needs to
// decide what to do with it. Its JSON is the dead-letter payload.
type DeadLetter struct {
	// OriginalEvent is the event as it was handed to Handle.
	OriginalEvent json.RawMessage `json:"original_event"`
	// IdempotencyKey identifies the event across attempts and services.
	IdempotencyKey string `json:"idempotency_key"`
	// AttemptCount is how many attempts were made.
	AttemptCount int `json:"attempt_count"`
	// LastError and ErrorType are the last attempt's error, with
	// credentials removed (internal/redact), and its Go type.
	LastError string `json:"last_error"`
	ErrorType string `json:"error_type"`
	// AbandonedReason is max_attempts_exceeded, ttl_exceeded or
	// non_retryable; with a Policy.Budget also budget_exhausted, and for
	// a handler error with a retry-after hint (retry.After) past
	// Policy.MaxRetryAfter, retry_after_exceeds_limit.
	AbandonedReason string `json:"abandoned_reason"`
	// ServiceName is Config.Service.
	ServiceName string `json:"service_name"`
	// Timestamp is when the event was given up on.
	Timestamp time.Time `json:"timestamp"`
}

// Config configures a Retrier.
type Config struct {
	// Service names the handling service in dead letters, metrics and
	// logs. Required.
	Service string
	// Policy is the retry policy; its Retryable is replaced (only
	// NotQueryable errors are retried). Each field left zero takes the
	// event retry's default (see Defaults), not the retry package's:
	// MaxAttempts 8, TTL 30 minutes (so a TTL cannot be switched off),
	// and a Backoff of 250 ms doubling to 60 s with full jitter, or for a
	// Backoff literal that sets some fields, those defaults for the
	// others (a Backoff made by backoff.Exponential, Constant or Linear
	// stands as given). Its Clock is used when Config.Clock is nil.
	Policy retry.Config
	// DeadLetter receives each event given up on. Required. When it
	// fails, Handle returns its error, so that the event is not
	// acknowledged and comes back.
	DeadLetter func(ctx context.Context, dl DeadLetter) error
	// Metrics, when set, counts successes, latencies, attempts and dead
	// letters (see NewMetrics).
	Metrics *Metrics
	// Logger receives the log lines: each retry at INFO, success after
	// retries at INFO, the last attempt or a TTL nearly spent at WARN, a
	// dead letter at ERROR. Default slog.Default().
	Logger *slog.Logger
	// Clock is the source of time. Default clock.Real.
	Clock clock.Clock
}

// The event retry's defaults: 8 attempts, a delay from 250 ms doubling up
// to 60 s with full jitter, abandoned after 30 minutes.
const (
	DefaultMaxAttempts   = 8
	DefaultBaseDelay     = 250 * time.Millisecond
	DefaultBackoffFactor = 2.0
	DefaultMaxDelay      = 60 * time.Second
	DefaultTTL           = 30 * time.Minute
)

// Defaults returns the default policy: 8 attempts, a delay from 250 ms
// doubling up to 60 s with full jitter, and a 30 minute TTL.
func Defaults() retry.Config {
	return retry.Config{
		MaxAttempts: DefaultMaxAttempts,
		TTL:         DefaultTTL,
		Backoff:     backoff.Exponential(DefaultBaseDelay, DefaultBackoffFactor, DefaultMaxDelay).WithJitter(backoff.JitterFull),
	}
}

// withDefaults returns pc with each zero field set to the event retry's
// default.
func withDefaults(pc retry.Config) retry.Config {
	def := Defaults()
	if pc.MaxAttempts == 0 {
		pc.MaxAttempts = def.MaxAttempts
	}
	if pc.TTL == 0 {
		pc.TTL = def.TTL
	}
	pc.Backoff = pc.Backoff.Or(def.Backoff)
	return pc
}

// Retrier runs event handlers under the event retry policy.
type Retrier struct {
	cfg    Config
	policy *retry.Policy
	clock  clock.Clock
	log    *slog.Logger
}

// New returns a Retrier, or an error naming the bad field.
func New(cfg Config) (*Retrier, error) {
	switch {
	case cfg.Service == "":
		return nil, errors.New("eventretry: Config.Service is empty")
	case cfg.DeadLetter == nil:
		return nil, errors.New("eventretry: Config.DeadLetter is nil; an event given up on must go somewhere")
	}
	cfg.Policy = withDefaults(cfg.Policy)
	if cfg.Clock == nil {
		cfg.Clock = cfg.Policy.Clock
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pc := cfg.Policy
	pc.Retryable = IsNotQueryable
	pc.Clock = cfg.Clock
	pc.Logger = nil // Handle logs, with the event's key
	p, err := retry.New(pc)
	if err != nil {
		return nil, fmt.Errorf("eventretry: Config.Policy: %w", err)
	}
	return &Retrier{cfg: cfg, policy: p, clock: cfg.Clock, log: cfg.Logger.With("service", cfg.Service)}, nil
}

// Handle calls fn for the event until it succeeds or the policy gives up.
// event is the original event, kept for the dead letter; key is its
// idempotency key. It returns nil when fn succeeded or the event was
// dead-lettered; an error matching ctx's error when ctx ended first, or
// when its deadline would pass before the next attempt (the event is not
// dead-lettered: it stays unacknowledged and comes back); and the
// dead-letter function's error when that failed.
func (r *Retrier) Handle(ctx context.Context, event json.RawMessage, key string, fn func(ctx context.Context) error) error {
	pc := r.policy.Config()
	log := r.log.With("idempotency_key", key)
	start := r.clock.Now()
	attempts := 0
	policy, err := retry.New(withHooks(pc, func(e retry.Event) {
		log.Info(fmt.Sprintf("retry attempt %d/%d", e.Attempt+1, pc.MaxAttempts), "err", redact.String(e.Err.Error()), "delay", e.Delay)
		if e.Attempt+1 == pc.MaxAttempts {
			log.Warn("the next attempt is the event's last", "max_attempts", pc.MaxAttempts)
		}
		if pc.TTL > 0 && e.Elapsed+e.Delay > pc.TTL*4/5 {
			log.Warn("the event's retries come close to its TTL", "ttl", pc.TTL, "elapsed", e.Elapsed)
		}
	}))
	if err != nil {
		return fmt.Errorf("eventretry: %w", err)
	}
	err = policy.Do(ctx, func(ctx context.Context) error {
		attempts++
		return fn(ctx)
	})
	elapsed := r.clock.Now().Sub(start)
	m := r.cfg.Metrics
	if err == nil {
		m.observeSuccess(r.cfg.Service, attempts, elapsed)
		if attempts > 1 {
			log.Info(fmt.Sprintf("event processed successfully after %d attempts", attempts), "latency", elapsed)
		}
		return nil
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason == retry.ReasonCancelled || re.Reason == retry.ReasonDeadline {
		// The caller's context ended, or would end before the next
		// attempt: the event stays unacknowledged and comes back.
		return err
	}
	last := re.Last
	if last == nil {
		last = err
	}
	dl := DeadLetter{
		OriginalEvent:   event,
		IdempotencyKey:  key,
		AttemptCount:    re.Attempts,
		LastError:       redact.String(last.Error()),
		ErrorType:       errorType(last),
		AbandonedReason: string(re.Reason),
		ServiceName:     r.cfg.Service,
		Timestamp:       r.clock.Now().UTC(),
	}
	if len(dl.OriginalEvent) == 0 || !json.Valid(dl.OriginalEvent) {
		raw, _ := json.Marshal(string(event))
		dl.OriginalEvent = raw
	}
	if derr := r.cfg.DeadLetter(ctx, dl); derr != nil {
		log.Error("event could not be sent to the dead-letter store; it stays unacknowledged", "err", redact.String(derr.Error()), "reason", dl.AbandonedReason)
		return fmt.Errorf("eventretry: dead-letter the event %s: %w", key, derr)
	}
	m.observeDeadLetter(r.cfg.Service, dl.AbandonedReason, attempts, elapsed)
	log.Error(fmt.Sprintf("event sent to the dead-letter store after %d attempts", dl.AttemptCount),
		"reason", dl.AbandonedReason, "err", dl.LastError, "error_type", dl.ErrorType)
	return nil
}

// withHooks returns pc with onRetry called before each wait, after any
// OnRetry pc has.
func withHooks(pc retry.Config, onRetry func(retry.Event)) retry.Config {
	prev := pc.OnRetry
	pc.OnRetry = func(e retry.Event) {
		if prev != nil {
			prev(e)
		}
		onRetry(e)
	}
	return pc
}

// errorType is the Go type of err recorded in a dead letter, looking
// through NotQueryable as through retry's markers.
func errorType(err error) string { return errtype.Name(err, &notQueryableError{}) }
