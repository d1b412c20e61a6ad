package weir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Limits of what a worker records with its job.
const (
	// MaxProgressMessage is the longest message SetProgress takes, in
	// bytes.
	MaxProgressMessage = weirtype.MaxProgressMessage
	// MaxOutput is the largest output SetOutput takes, in bytes of JSON.
	MaxOutput = weirtype.MaxOutput
)

// ErrNotInAttempt is returned by SetProgress and SetOutput called with a
// context that is not a job attempt's (one a worker's Work received, or
// derived from it).
var ErrNotInAttempt = errors.New("weir: the context is not a job attempt's")

// OutputError is the error of an attempt whose worker succeeded with an
// output SetOutput refused (larger than MaxOutput, or not JSON): the
// attempt fails and, since its output would be refused again, the job is
// abandoned to the dead-letter store at once, reason non_retryable. The
// output is never cut to fit.
type OutputError struct {
	// Size is the output's size in bytes of JSON.
	Size int
	// Err says what is wrong with it.
	Err error
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("weir: the job's output (%d bytes of JSON) was refused: %v", e.Size, e.Err)
}

func (e *OutputError) Unwrap() error { return e.Err }

// attemptKey is the context key of the attempt a worker runs.
type attemptKey struct{}

// attemptCtx is what a worker's context carries: its client and its
// running attempt.
type attemptCtx struct {
	c *Client
	r *runningJob
}

// results is what an attempt's worker recorded to go with its success.
type results struct {
	mu sync.Mutex
	// output is the compacted JSON SetOutput took last; outputErr the
	// error of its last refused output, cleared by an output it took.
	output    json.RawMessage
	outputErr error
}

func withAttempt(ctx context.Context, c *Client, r *runningJob) context.Context {
	return context.WithValue(ctx, attemptKey{}, attemptCtx{c: c, r: r})
}

func attemptOf(ctx context.Context) (attemptCtx, error) {
	a, ok := ctx.Value(attemptKey{}).(attemptCtx)
	if !ok || a.r == nil {
		return a, ErrNotInAttempt
	}
	return a, nil
}

// SetProgress records, with the running job whose attempt's context ctx
// is, how far the attempt has got: percent from 0 to 100, and a message
// of at most MaxProgressMessage bytes of UTF-8 (empty for none). It is
// stored at once, guarded by the attempt's lease, and replaces the
// previous progress; `weir jobs show`, the admin API and the console show
// it with the attempt that wrote it and when. Each call is one write to
// the store: call it when the progress changes enough to show (every few
// seconds at most), not for each item of a loop.
//
// A percent out of range, a longer message or one that is not UTF-8 text
// is refused, naming it, and nothing is written: the message is not cut.
// An error wrapping store.ErrLeaseLost means the attempt lost its job
// (cancelled, taken back or given to another worker): the worker should
// stop, as its context will end soon.
func SetProgress(ctx context.Context, percent float64, message string) error {
	a, err := attemptOf(ctx)
	if err != nil {
		return fmt.Errorf("weir: SetProgress: %w", err)
	}
	p := weirtype.Progress{Percent: percent, Message: message}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("weir: SetProgress: %w", err)
	}
	l := a.r.lease
	if a.r.superseded.Load() {
		return fmt.Errorf("weir: SetProgress: job %d: superseded by a later attempt: %w", l.ID, store.ErrLeaseLost)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.c.storeTimeout())
	defer cancel()
	if err := a.c.ex.SetProgress(sctx, a.c.clock.Now(), l, p); err != nil {
		return fmt.Errorf("weir: SetProgress: %w", err)
	}
	return nil
}

// SetOutput sets the output of the attempt whose context ctx is: v,
// encoded with encoding/json, is stored with the job when the attempt
// succeeds (in the same write that completes it), and shown by `weir jobs
// show`, the admin API and the console. A later call replaces it; an
// attempt that fails stores none, nor does a success after the job's
// deadline (a late result, which keeps no output). The encoded output may be at most
// MaxOutput bytes (64 KiB): a larger one, or a v that does not encode, is
// refused with an error wrapping store.ErrInvalid, and if the worker then
// returns nil without a SetOutput that is taken, the attempt fails with an
// *OutputError and the job is abandoned (non_retryable) rather than
// completed with its output cut or lost. Keep large results in your own
// tables or a blob store, and put their key in the output.
func SetOutput(ctx context.Context, v any) error {
	a, err := attemptOf(ctx)
	if err != nil {
		return fmt.Errorf("weir: SetOutput: %w", err)
	}
	out, size, err := encodeOutput(v)
	res := &a.r.results
	res.mu.Lock()
	defer res.mu.Unlock()
	if err != nil {
		res.output, res.outputErr = nil, &OutputError{Size: size, Err: err}
		return fmt.Errorf("weir: SetOutput: %w", err)
	}
	res.output, res.outputErr = out, nil
	return nil
}

// encodeOutput is v as compact JSON, and its size, or an error wrapping
// store.ErrInvalid that says why it cannot be stored.
func encodeOutput(v any) (json.RawMessage, int, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, 0, weirtype.Invalidf("output: %v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, len(b), weirtype.Invalidf("output: %v", err)
	}
	out := json.RawMessage(buf.Bytes())
	if err := weirtype.CheckOutput(out); err != nil {
		return nil, len(out), err
	}
	if strings.TrimSpace(string(out)) == "null" {
		return nil, len(out), nil
	}
	return out, len(out), nil
}

// outcome is the attempt's result as the client records it: a success
// with a refused output fails, permanently.
func (r *runningJob) outcome(err error) error {
	if err != nil {
		return err
	}
	r.results.mu.Lock()
	defer r.results.mu.Unlock()
	if r.results.outputErr != nil {
		return retry.Permanent(r.results.outputErr)
	}
	return nil
}

// output is the output of the attempt's success; nil for none.
func (r *runningJob) output() json.RawMessage {
	r.results.mu.Lock()
	defer r.results.mu.Unlock()
	return r.results.output
}

// completeLeases completes the jobs of leases, those of xs not
// superseded, at now: with one CompleteMany when none has an output,
// otherwise with one CompleteOutputs that stores each output with its
// completion.
func (c *Client) completeLeases(ctx context.Context, now time.Time, xs []completion, leases []store.Lease) ([]int64, error) {
	outputs := map[store.Lease]json.RawMessage{}
	for _, x := range xs {
		if out := x.run.output(); out != nil {
			outputs[x.run.lease] = out
		}
	}
	if len(outputs) == 0 {
		return c.ex.CompleteMany(ctx, now, leases)
	}
	cs := make([]store.Completion, len(leases))
	for i, l := range leases {
		cs[i] = store.Completion{Lease: l, Output: outputs[l]}
	}
	return c.ex.CompleteOutputs(ctx, now, cs)
}
