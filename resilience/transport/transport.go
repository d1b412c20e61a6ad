package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/defaults"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/timeout"
)

// DefaultMaxBufferedBody is the default of Config.MaxBufferedBody: 1 MiB.
const DefaultMaxBufferedBody int64 = 1 << 20

// maxDrain is how much of a retried response's body is read, so that its
// connection can be reused, before it is closed.
const maxDrain = 64 << 10

// Config configures a Transport. The zero value works: http.DefaultTransport
// with the retry package's default policy, no breaker and no per-attempt
// timeout.
type Config struct {
	// Base sends each attempt. Default http.DefaultTransport.
	Base http.RoundTripper
	// Retry is the retry policy, built with retry.New. Its zero value is
	// retry's default: 6 attempts in all, waits from 1 s doubling to 60 s
	// with ±20% jitter, no TTL, a Retry-After honoured in full up to 10
	// minutes. Its Retryable field is ignored: the
	// transport classifies each attempt itself (see the package doc).
	// Its OnRetry, if set, is called after the retried response has been
	// drained. Its Logger defaults to Logger. Its Clock times the waits and
	// is the "now" of a Retry-After date.
	Retry retry.Config
	// Breaker, if set, admits each attempt and counts its outcome. It may
	// be shared with other transports and callers of the same dependency.
	// Default nil: no breaker.
	Breaker *breaker.Breaker
	// MaxRetryAfter is the longest Retry-After the transport waits for; a
	// response asking for a longer wait is returned at once, and GiveUp
	// tells reason retry_after_exceeds_limit. It is Retry.MaxRetryAfter
	// under a name of its own: set either, or both to the same value.
	// Default 10 minutes (retry.DefaultMaxRetryAfter). Must not be
	// negative.
	MaxRetryAfter time.Duration
	// AttemptTimeout is how long each attempt may wait for its response
	// headers; the body is not timed. Default 0: no per-attempt timeout
	// (the caller's context still applies). Must not be negative.
	AttemptTimeout time.Duration
	// RetryNonIdempotent retries requests that are not idempotent (a POST
	// or PATCH without an idempotency-key header) as if they were: on
	// every retryable status and on timeouts and resets, not only on dial
	// errors, a 429 and a 503 with a Retry-After. Set it for calls that
	// change nothing but what they cost, such as an LLM's completions.
	// Default false.
	RetryNonIdempotent bool
	// MaxBufferedBody is the largest request body, in bytes, that is read
	// into memory so that it can be sent again, for a request without
	// GetBody. A longer body is sent once, without retries, whole and
	// unchanged. Default 1 MiB (DefaultMaxBufferedBody). Must not be
	// negative.
	MaxBufferedBody int64
	// Logger, if set, logs the transport's own decisions (a Retry-After
	// that cannot be parsed, a body too long to replay) and, unless
	// Retry.Logger is set, the retries. Default nil: no logs.
	Logger *slog.Logger
}

// Transport is an http.RoundTripper that retries, goes through a circuit
// breaker and times each attempt, as the package doc describes. It is safe
// for concurrent use.
type Transport struct {
	base           http.RoundTripper
	policy         *retry.Policy
	maxAttempts    int
	clock          clock.Clock
	breaker        *breaker.Breaker
	attemptTimeout time.Duration
	retryAll       bool
	maxBuffered    int64
	logger         *slog.Logger
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport, or an error naming the bad field.
func New(cfg Config) (*Transport, error) {
	if cfg.Base == nil {
		cfg.Base = http.DefaultTransport
	}
	if cfg.AttemptTimeout < 0 {
		return nil, fmt.Errorf("transport: AttemptTimeout %v is negative", cfg.AttemptTimeout)
	}
	if err := defaults.Set("transport: MaxBufferedBody", &cfg.MaxBufferedBody, DefaultMaxBufferedBody); err != nil {
		return nil, err
	}
	if cfg.MaxRetryAfter < 0 {
		return nil, fmt.Errorf("transport: MaxRetryAfter %v is negative", cfg.MaxRetryAfter)
	}
	t := &Transport{
		base:           cfg.Base,
		breaker:        cfg.Breaker,
		attemptTimeout: cfg.AttemptTimeout,
		retryAll:       cfg.RetryNonIdempotent,
		maxBuffered:    cfg.MaxBufferedBody,
		logger:         cfg.Logger,
	}
	rc := cfg.Retry
	switch {
	case cfg.MaxRetryAfter == 0:
	case rc.MaxRetryAfter == 0:
		rc.MaxRetryAfter = cfg.MaxRetryAfter
	case rc.MaxRetryAfter != cfg.MaxRetryAfter:
		return nil, fmt.Errorf("transport: MaxRetryAfter %v and Retry.MaxRetryAfter %v differ; set one",
			cfg.MaxRetryAfter, rc.MaxRetryAfter)
	}
	// Each attempt marks the errors it must not retry Permanent, since
	// that depends on the request; a policy-wide classifier cannot know.
	rc.Retryable = retry.IsRetryable
	onRetry := rc.OnRetry
	rc.OnRetry = func(ev retry.Event) {
		if se, ok := errors.AsType[*StatusError](ev.Err); ok {
			t.discard(se.takeResponse())
		}
		if onRetry != nil {
			onRetry(ev)
		}
	}
	if rc.Logger == nil {
		rc.Logger = cfg.Logger
	}
	p, err := retry.New(rc)
	if err != nil {
		return nil, fmt.Errorf("transport: Retry: %w", err)
	}
	t.policy = p
	t.maxAttempts = p.Config().MaxAttempts
	t.clock = p.Config().Clock
	return t, nil
}

// StatusError is the error an attempt that got a retryable status gives the
// retry policy. Config.Retry.OnRetry sees it in Event.Err, and RoundTrip
// returns it, inside an *Error, when the caller's context ends while
// waiting to retry such a response. When the policy stops on it otherwise,
// RoundTrip returns the response itself, not an error, and GiveUp reads
// the *Error from the response.
type StatusError struct {
	// StatusCode and Status are the response's.
	StatusCode int
	Status     string

	resp *http.Response // until it is drained or returned
	// notRetried says why a retryable status is not retried, if it is not.
	notRetried string
}

func (e *StatusError) Error() string {
	if e.notRetried != "" {
		return "transport: response status " + e.Status + " not retried: " + e.notRetried
	}
	return "transport: retryable response status " + e.Status
}

func (e *StatusError) takeResponse() *http.Response {
	r := e.resp
	e.resp = nil
	return r
}

// RoundTrip sends req, retrying as the package doc describes. It never
// changes req, and closes req.Body on every path, as a RoundTripper must.
// An error it returns after any attempt is an *Error; a response it
// returns after giving up on a retryable status carries one for GiveUp.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := &call{t: t, req: req, idempotent: t.retryAll || Idempotent(req)}
	if err := c.prepareBody(); err != nil {
		return nil, c.redact(err)
	}
	err := t.policy.Do(req.Context(), c.attempt)
	if c.first != nil { // no attempt took the caller's body
		c.first.Close()
		c.first = nil
	}
	if err == nil {
		return c.final, nil
	}
	re, _ := errors.AsType[*retry.Error](err)
	te := &Error{Attempts: c.attempts, LastStatus: c.lastStatus, Err: err}
	if re != nil {
		te.Reason, te.Detail = re.Reason, re.Detail
	}
	se, _ := errors.AsType[*StatusError](err)
	switch {
	case te.Detail != "":
	case se != nil && se.notRetried != "":
		te.Detail = se.notRetried
	case errors.Is(err, breaker.ErrOpen):
		te.Detail = "the breaker is open"
	}
	te.Detail = redact.String(te.Detail, c.secrets()...)
	if se != nil {
		if resp := se.takeResponse(); resp != nil {
			if te.Reason != retry.ReasonCancelled {
				attach(resp, req, te)
				return resp, nil
			}
			resp.Body.Close()
		}
	}
	return nil, te
}

// CloseIdleConnections closes the idle connections of the base transport, if
// it has such a method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// call is the state of one RoundTrip.
type call struct {
	t          *Transport
	req        *http.Request
	idempotent bool
	hasBody    bool
	// first is the body of the first attempt; nil once an attempt took it.
	first io.ReadCloser
	// getBody returns the body of a later attempt; nil if the body cannot
	// be sent twice.
	getBody  func() (io.ReadCloser, error)
	attempts int
	final    *http.Response
	// lastStatus is the status of the last response an attempt got.
	lastStatus int
	// creds are the request's credentials, read when first needed.
	creds     []string
	credsRead bool
}

// secrets returns the credentials the request carries, to remove from
// every error and log line of the call.
func (c *call) secrets() []string {
	if !c.credsRead {
		c.creds = redact.Credentials(c.req.Header, c.req.URL)
		c.credsRead = true
	}
	return c.creds
}

// redact returns err with the request's credentials, and those an
// upstream may have echoed, removed from its message; it unwraps to err.
func (c *call) redact(err error) error {
	if err == nil {
		return nil
	}
	return redact.Error(err, c.secrets()...)
}

// prepareBody makes the request's body replayable, buffering it if it has no
// GetBody and is short enough.
func (c *call) prepareBody() error {
	req := c.req
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	c.hasBody = true
	c.first = req.Body
	switch {
	case req.GetBody != nil:
		c.getBody = req.GetBody
		return nil
	case c.t.maxAttempts <= 1:
		return nil // never sent twice
	case req.ContentLength > c.t.maxBuffered:
		c.tooLong()
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(req.Body, c.t.maxBuffered+1))
	if err != nil {
		req.Body.Close()
		c.first = nil
		return fmt.Errorf("transport: read request body: %w", err)
	}
	if int64(len(buf)) > c.t.maxBuffered {
		// Send what was read, then the rest, once.
		c.first = readCloser{io.MultiReader(bytes.NewReader(buf), req.Body), req.Body}
		c.tooLong()
		return nil
	}
	req.Body.Close()
	c.getBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	c.first, _ = c.getBody()
	return nil
}

func (c *call) tooLong() {
	if c.t.logger != nil {
		host := c.req.Host
		if host == "" && c.req.URL != nil {
			host = c.req.URL.Host
		}
		c.t.logger.LogAttrs(c.req.Context(), slog.LevelInfo, "request body too long to replay; sending it once, without retries",
			slog.String("method", c.req.Method), slog.String("host", host),
			slog.Int64("max_buffered_body", c.t.maxBuffered))
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// replayable reports whether the request can be sent again.
func (c *call) replayable() bool { return !c.hasBody || c.getBody != nil }

func (c *call) body() (io.ReadCloser, error) {
	if !c.hasBody {
		return c.req.Body, nil
	}
	if b := c.first; b != nil {
		c.first = nil
		return b, nil
	}
	if c.getBody == nil {
		return nil, errors.New("transport: request body cannot be sent again")
	}
	b, err := c.getBody()
	if err != nil {
		return nil, fmt.Errorf("transport: GetBody: %w", err)
	}
	return b, nil
}

// attempt is one try, run by the retry policy. It returns nil when the
// response is final (c.final), a *StatusError for a response to retry (or
// not to retry, marked Permanent), and the transport error otherwise,
// marked Permanent when it must not be retried. The error's message has
// credentials removed: the policy logs it.
func (c *call) attempt(ctx context.Context) error {
	return c.redact(c.try(ctx))
}

func (c *call) try(ctx context.Context) error {
	c.attempts++
	body, err := c.body()
	if err != nil {
		return retry.Permanent(err)
	}
	br := c.t.breaker
	var ticket breaker.Ticket
	if br != nil {
		if ticket, err = br.Allow(); err != nil {
			if body != nil {
				body.Close()
			}
			return retry.Permanent(err)
		}
		counted := false
		defer func() {
			if !counted { // the base transport panicked
				br.Done(ticket, breaker.Failure)
			}
		}()
		resp, err := c.send(ctx, body)
		br.Done(ticket, outcome(ctx, resp, err))
		counted = true
		return c.judge(ctx, resp, err)
	}
	resp, err := c.send(ctx, body)
	return c.judge(ctx, resp, err)
}

// outcome is what an attempt means for the breaker.
func outcome(ctx context.Context, resp *http.Response, err error) breaker.Outcome {
	switch {
	case err != nil && ctx.Err() != nil:
		return breaker.Ignored // the caller gave up
	case err != nil, RetryableStatus(resp.StatusCode):
		return breaker.Failure
	}
	return breaker.Success
}

// judge turns an attempt's result into what the retry policy sees.
func (c *call) judge(ctx context.Context, resp *http.Response, err error) error {
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			if !errors.Is(err, cerr) { // make the policy see a cancellation
				err = fmt.Errorf("%w: %w", err, cerr)
			}
			return err
		}
		if !c.replayable() || !RetryableError(err, c.idempotent) {
			return retry.Permanent(err)
		}
		if open := c.breakerOpened(); open != nil {
			return retry.Permanent(fmt.Errorf("%w; %w", err, open))
		}
		return err
	}
	c.lastStatus = resp.StatusCode
	if !RetryableStatus(resp.StatusCode) {
		c.final = resp
		return nil
	}
	se := &StatusError{StatusCode: resp.StatusCode, Status: resp.Status, resp: resp}
	hint, hinted := c.retryAfter(ctx, resp)
	switch {
	case !c.replayable():
		se.notRetried = "the request body cannot be sent again"
	case !c.idempotent && !notProcessed(resp.StatusCode, hinted):
		se.notRetried = c.req.Method + " is not idempotent and the status does not say the request was not processed"
	}
	if se.notRetried != "" {
		return retry.Permanent(se)
	}
	if open := c.breakerOpened(); open != nil {
		return retry.Permanent(fmt.Errorf("%w; %w", se, open))
	}
	if hinted {
		return retry.After(se, hint)
	}
	return se
}

// notProcessed reports a status that says the server did not act on the
// request, so that even a request that is not idempotent can be sent
// again: 429 Too Many Requests, and 503 Service Unavailable with a
// Retry-After.
func notProcessed(code int, retryAfter bool) bool {
	return code == http.StatusTooManyRequests || (code == http.StatusServiceUnavailable && retryAfter)
}

// retryAfter reads the response's Retry-After header; one that cannot be
// parsed is logged and ignored.
func (c *call) retryAfter(ctx context.Context, resp *http.Response) (time.Duration, bool) {
	v, ok := resp.Header["Retry-After"]
	if !ok || len(v) == 0 {
		return 0, false
	}
	d, err := ParseRetryAfter(v[0], c.t.clock.Now())
	if err == nil {
		return d, true
	}
	if c.t.logger != nil {
		c.t.logger.LogAttrs(ctx, slog.LevelWarn, "ignoring retry-after",
			slog.Int("attempt", c.attempts), slog.Int("status", resp.StatusCode),
			slog.String("err", redact.String(err.Error(), c.secrets()...)))
	}
	return 0, false
}

// breakerOpened returns the breaker's refusal if the breaker is open now,
// so that the call stops instead of waiting for a retry it would refuse.
func (c *call) breakerOpened() error {
	br := c.t.breaker
	if br == nil || c.attempts >= c.t.maxAttempts || br.State() != breaker.Open {
		return nil // no breaker, no retry to refuse, or not open
	}
	ticket, err := br.Allow()
	if err == nil { // it became half-open meanwhile: give the slot back
		br.Done(ticket, breaker.Ignored)
	}
	return err
}

// send makes one attempt with the per-attempt timeout.
func (c *call) send(ctx context.Context, body io.ReadCloser) (*http.Response, error) {
	d := c.t.attemptTimeout
	if d == 0 {
		return c.roundTrip(ctx, body)
	}
	actx, cancel := context.WithCancelCause(ctx)
	timedOut := &timeout.Error{After: d, Err: context.DeadlineExceeded}
	timer := time.AfterFunc(d, func() { cancel(timedOut) })
	resp, err := c.roundTrip(actx, body)
	if !timer.Stop() {
		// The timer fired, before the headers or just as they came; either
		// way the attempt's context is gone and so is any body.
		if resp != nil {
			resp.Body.Close()
		}
		cancel(nil)
		switch {
		case ctx.Err() != nil: // the caller's end wins; judge reports it
			if err == nil {
				err = context.Cause(ctx)
			}
		case err == nil || !errors.Is(err, timeout.ErrTimeout):
			err = timedOut
		}
		return nil, err
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = withCancel(resp.Body, cancel)
	return resp, nil
}

// roundTrip sends a clone of the request with ctx and body through the base
// transport.
func (c *call) roundTrip(ctx context.Context, body io.ReadCloser) (*http.Response, error) {
	r := c.req.Clone(ctx)
	if c.hasBody {
		r.Body = body
		r.GetBody = c.getBody
	}
	resp, err := c.t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.Body == nil { // some RoundTrippers in the wild, mostly fakes
		resp.Body = http.NoBody
	}
	return resp, nil
}

// discard drains and closes a response that is about to be retried, so that
// its connection can be reused. With a per-attempt timeout, draining gets
// that long too.
func (t *Transport) discard(resp *http.Response) {
	if resp == nil {
		return
	}
	if cancel := cancelOf(resp.Body); cancel != nil && t.attemptTimeout > 0 {
		timer := time.AfterFunc(t.attemptTimeout, func() { cancel(context.DeadlineExceeded) })
		defer timer.Stop()
	}
	io.CopyN(io.Discard, resp.Body, maxDrain)
	resp.Body.Close()
}

// cancelBody ends an attempt's context when the response body is closed or
// read to its end.
type cancelBody struct {
	rc     io.ReadCloser
	cancel context.CancelCauseFunc
}

// withCancel wraps body so that closing it, or reading it to its end, calls
// cancel. A body that is also an io.Writer (a 101 Switching Protocols
// response) stays one.
func withCancel(body io.ReadCloser, cancel context.CancelCauseFunc) io.ReadCloser {
	cb := &cancelBody{rc: body, cancel: cancel}
	if w, ok := body.(io.Writer); ok {
		return &cancelRWBody{cb, w}
	}
	return cb
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.cancel(nil)
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// cancelOf returns the cancel func of a body made by withCancel, or nil.
func cancelOf(body io.ReadCloser) context.CancelCauseFunc {
	switch b := body.(type) {
	case *cancelBody:
		return b.cancel
	case *cancelRWBody:
		return b.cancel
	}
	return nil
}

type cancelRWBody struct {
	*cancelBody
	w io.Writer
}

func (b *cancelRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }
