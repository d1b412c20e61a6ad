// Package workflow runs multi-step transactions that survive a crash at
// any point: a workflow is a set of named states, each with a handler that
// does the state's work and says where to go next. Its context (id,
// state, status, small user data, version, times) is persisted at every
// transition, in the same transaction as the job that runs the next state,
// so a restart resumes every unfinished workflow from its persisted state.
//
// Each state runs as a job of the engine (kind weir.workflow.step), with
// its retries, leases and dead letters: a process killed during a state
// has the state run again by another, or by itself after a restart. A
// state's handler must therefore be safe to run again; side effects
// outside the database go through the effect ledger (Run.Ledger), which
// runs each once. A transition names the version it starts from, so that
// of two runs of one state only the first moves the workflow on.
//
// A workflow that makes no progress for its definition's StallAfter is
// given up by SweepStalled: the definition's OnStall hook cleans up, and
// the workflow is marked failed. When a workflow ends, completed or
// failed, and its definition names a NotifyTopic, a notification is added
// to the outbox in the transaction that ends it: sent at least once, with
// a stable broker id, which consumers dedupe (inbox.Handle).
package workflow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/ledger"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// StepKind is the job kind that runs a workflow's states.
const StepKind = "weir.workflow.step"

// DefaultStallAfter is Definition.StallAfter's default.
const DefaultStallAfter = time.Hour

// Handler runs one state of a workflow and returns the transition: Goto,
// Complete or Fail. An error fails the attempt, which the engine retries
// after the step's backoff; once the step's attempts are spent, or for an
// error marked retry.Permanent, the workflow fails with it (and the step's
// job goes to the dead-letter store). A failure of the engine's own read
// or write of the workflow (a lost connection, a database restarting) is
// not the state's: the step runs again a second later, without spending
// an attempt, however its handler ended.
type Handler func(ctx context.Context, r *Run) (Next, error)

// Run is what a state's handler is given.
type Run struct {
	// Workflow is the workflow as persisted before this state ran.
	Workflow *weirtype.Workflow
	// Ledger runs the state's side effects outside the database once,
	// across runs of the state.
	Ledger *ledger.Ledger
	// Attempt is the state's attempt, from 1.
	Attempt int
}

// Next is a state's transition.
type Next struct {
	state    string
	status   weirtype.WorkflowStatus
	data     []byte
	keepData bool
	reason   string
}

// Goto moves the workflow to state, with data as its user data (nil keeps
// the data it has).
func Goto(state string, data []byte) Next {
	return Next{state: state, status: weirtype.WorkflowRunning, data: data, keepData: data == nil}
}

// Complete ends the workflow as completed, with data (nil keeps the data
// it has).
func Complete(data []byte) Next {
	return Next{status: weirtype.WorkflowCompleted, data: data, keepData: data == nil}
}

// Fail ends the workflow as failed, for reason: input that can never
// succeed, say.
func Fail(reason string) Next {
	return Next{status: weirtype.WorkflowFailed, keepData: true, reason: reason}
}

// Definition is a kind of workflow.
type Definition struct {
	// Name names it; stored with each workflow, so keep it stable.
	// Required.
	Name string
	// Start is the state a workflow starts in. Required, and among States.
	Start string
	// States are the handlers, by state name. Required.
	States map[string]Handler
	// StallAfter is how long a running workflow may go without a
	// transition before SweepStalled gives it up. Default 1 h.
	StallAfter time.Duration
	// OnStall cleans up after a workflow given up as stalled (its queues,
	// its partial files), once it is marked failed. Optional; an error is
	// logged. A state still running when its workflow is given up cannot
	// move it on, so StallAfter must be longer than any run of a state
	// (New refuses one not longer than Config.Step.Timeout).
	OnStall func(ctx context.Context, wf *weirtype.Workflow) error
	// NotifyTopic, when set, is the topic of the notification added to
	// the outbox when a workflow ends.
	NotifyTopic string
}

// Notification is the body of the message a workflow's end adds to the
// outbox, as JSON. Its broker id is stable across republishes, and there
// is one per workflow: consumers dedupe on either.
type Notification struct {
	Workflow string                  `json:"workflow"`
	Name     string                  `json:"name"`
	Status   weirtype.WorkflowStatus `json:"status"`
	State    string                  `json:"state"`
	Error    string                  `json:"error,omitempty"`
	Data     json.RawMessage         `json:"data,omitempty"`
}

// Store is what the engine needs of a store: its queries, and
// transactions of its own.
type Store interface {
	store.Store
	store.Transactor
}

// Config configures an Engine.
type Config struct {
	// Store keeps the workflows and runs the steps' jobs. Required.
	Store Store
	// Workers gets the step kind; give it to the weir.Client that runs
	// the steps. Required.
	Workers *weir.Workers
	// Definitions are the kinds of workflow the engine runs. At least one.
	Definitions []*Definition
	// Step is the policy of the step jobs: attempts, backoff, timeout,
	// queue. Its zero value is weir.KindConfig's defaults.
	Step weir.KindConfig
	// Clock and Logger. Defaults clock.Real and slog.Default().
	Clock  clock.Clock
	Logger *slog.Logger
}

// Engine starts, runs, resumes and sweeps workflows.
type Engine struct {
	st     Store
	defs   map[string]*Definition
	step   weir.KindConfig
	clock  clock.Clock
	log    *slog.Logger
	ledger *ledger.Ledger
}

// New returns an Engine and adds the step kind to cfg.Workers, or
// returns an error naming the bad field.
func New(cfg Config) (*Engine, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("workflow: Config.Store is nil")
	case cfg.Workers == nil:
		return nil, errors.New("workflow: Config.Workers is nil")
	case len(cfg.Definitions) == 0:
		return nil, errors.New("workflow: Config.Definitions is empty")
	}
	defs := make(map[string]*Definition, len(cfg.Definitions))
	for i, d := range cfg.Definitions {
		switch {
		case d == nil || d.Name == "":
			return nil, fmt.Errorf("workflow: Config.Definitions[%d] has no Name", i)
		case defs[d.Name] != nil:
			return nil, fmt.Errorf("workflow: definition %q is given twice", d.Name)
		case d.States[d.Start] == nil:
			return nil, fmt.Errorf("workflow: definition %q: Start %q is not among its States", d.Name, d.Start)
		case d.StallAfter < 0:
			return nil, fmt.Errorf("workflow: definition %q: StallAfter %v is negative", d.Name, d.StallAfter)
		case cfg.Step.Timeout > 0 && cmp.Or(d.StallAfter, DefaultStallAfter) <= cfg.Step.Timeout:
			return nil, fmt.Errorf("workflow: definition %q: StallAfter %v is not longer than Config.Step.Timeout %v: a state still running would be given up",
				d.Name, cmp.Or(d.StallAfter, DefaultStallAfter), cfg.Step.Timeout)
		}
		for state, h := range d.States {
			if state == "" || h == nil {
				return nil, fmt.Errorf("workflow: definition %q: state %q has no name or no handler", d.Name, state)
			}
		}
		defs[d.Name] = d
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Engine{st: cfg.Store, defs: defs, step: cfg.Step, clock: clock.Or(cfg.Clock), log: cfg.Logger}
	e.ledger = ledger.New(cfg.Store.Executor(), e.clock, cfg.Logger)
	if err := weir.AddWorker(cfg.Workers, weir.WorkFunc(e.work), cfg.Step); err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	return e, nil
}

// stepArgs are a step job's arguments: the workflow, and the version whose
// state it runs.
type stepArgs struct {
	Workflow string `json:"workflow"`
	Version  int64  `json:"version"`
}

func (stepArgs) Kind() string { return StepKind }

// stepJob is the job that runs wf's state at wf's version. Its
// idempotency key makes one job per version, however often it is
// inserted.
func (e *Engine) stepJob(wf *weirtype.Workflow) (store.InsertParams, error) {
	payload, err := json.Marshal(stepArgs{Workflow: wf.ID, Version: wf.Version})
	if err != nil {
		return store.InsertParams{}, err
	}
	return store.InsertParams{
		Kind:           StepKind,
		Queue:          e.step.Queue,
		Payload:        payload,
		MaxAttempts:    e.step.MaxAttempts,
		IdempotencyKey: weirtype.IdempotencyKey(StepKind, wf.ID, fmt.Sprint(wf.Version)),
		Source:         "workflow " + wf.ID,
	}, nil
}

// insertStep inserts the step job of wf through ex, and returns what the
// insert found. A running step is never taken back as stuck here: the
// stuck sweep does that, with the kind's threshold.
func (e *Engine) insertStep(ctx context.Context, ex store.Jobs, wf *weirtype.Workflow) (weirtype.InsertOutcome, error) {
	p, err := e.stepJob(wf)
	if err != nil {
		return "", err
	}
	p.StuckAfter = neverStuck
	rs, err := ex.Insert(ctx, e.clock.Now(), []store.InsertParams{p})
	if err != nil {
		return "", err
	}
	return rs[0].Outcome, nil
}

// neverStuck is the stuck threshold of the engine's own inserts of a step
// job: longer than any run.
const neverStuck = 100 * 365 * 24 * time.Hour

// Tx is what Start writes through: the workflow, and the job of its first
// state. A store.Executor is one.
type Tx interface {
	store.Workflows
	store.Jobs
}

// Start starts the workflow id of the definition name with data, through
// ex: bind ex to the caller's transaction (sqlite.Store.Tx,
// postgres.Store.Tx) so that the workflow starts when the caller's data
// commits. A workflow with the id that exists already is returned as it
// is, with started false.
func (e *Engine) Start(ctx context.Context, ex Tx, name, id string, data []byte) (wf *weirtype.Workflow, started bool, err error) {
	d := e.defs[name]
	if d == nil {
		return nil, false, fmt.Errorf("workflow: start %s: no definition %q", id, name)
	}
	wf, created, err := ex.CreateWorkflow(ctx, e.clock.Now(), store.WorkflowParams{ID: id, Name: name, State: d.Start, Data: data})
	if err != nil {
		return nil, false, fmt.Errorf("workflow: start %s: %w", id, err)
	}
	if created {
		if _, err := e.insertStep(ctx, ex, wf); err != nil {
			return nil, false, fmt.Errorf("workflow: start %s: %w", id, err)
		}
	}
	return wf, created, nil
}

// Resume makes sure that every running workflow has the job of its
// current state, and returns how many it had to insert. A workflow whose
// current step job ended without moving it on (abandoned to the
// dead-letter store after its lease expired on its last attempt, say, or
// cancelled) is failed, with the reason. Call it at start, and now and
// then: the jobs are durable, so it finds work only after a failure, but
// it is always safe.
func (e *Engine) Resume(ctx context.Context) (int, error) {
	ex := e.st.Executor()
	inserted := 0
	after := ""
	for {
		wfs, err := ex.ListWorkflows(ctx, store.WorkflowFilter{Status: weirtype.WorkflowRunning, AfterID: after, Limit: 500})
		if err != nil {
			return inserted, fmt.Errorf("workflow: resume: %w", err)
		}
		for _, wf := range wfs {
			if e.defs[wf.Name] == nil {
				continue // another process's kind of workflow
			}
			outcome, err := e.insertStep(ctx, ex, wf)
			if err != nil {
				return inserted, fmt.Errorf("workflow: resume %s: %w", wf.ID, err)
			}
			switch outcome {
			case weirtype.Inserted:
				inserted++
				e.log.Info("resumed a workflow without its step job", "workflow", wf.ID, "state", wf.State, "version", wf.Version)
			case weirtype.DuplicateFinal, weirtype.DuplicateCompleted:
				reason := fmt.Sprintf("the job of state %s ended (%s) without moving the workflow on", wf.State, outcome)
				err := e.end(ctx, e.defs[wf.Name], wf, Next{status: weirtype.WorkflowFailed, keepData: true, reason: reason})
				if err != nil && !errors.Is(err, store.ErrConflict) {
					return inserted, err
				}
				if err == nil {
					e.log.Warn("workflow failed: its step job ended without moving it on", "workflow", wf.ID, "state", wf.State, "outcome", string(outcome))
				}
			}
		}
		if len(wfs) < 500 {
			return inserted, nil
		}
		after = wfs[len(wfs)-1].ID
	}
}

// SweepStalled gives up the running workflows that made no transition for
// their definition's StallAfter: it runs the definition's OnStall, then
// marks the workflow failed. It returns how many it gave up.
func (e *Engine) SweepStalled(ctx context.Context) (int, error) {
	now := e.clock.Now()
	failed := 0
	for _, d := range e.defs {
		stall := d.StallAfter
		if stall == 0 {
			stall = DefaultStallAfter
		}
		after := ""
		for {
			wfs, err := e.st.Executor().ListWorkflows(ctx, store.WorkflowFilter{Name: d.Name, Status: weirtype.WorkflowRunning,
				UpdatedBefore: now.Add(-stall), AfterID: after, Limit: 500})
			if err != nil {
				return failed, fmt.Errorf("workflow: sweep: %w", err)
			}
			for _, wf := range wfs {
				// Fail it first: a run of its state that was only slow then
				// cannot move it on, and the cleanup runs on a workflow
				// that is over.
				reason := fmt.Sprintf("no progress for %v (in state %s since %s)", stall, wf.State, wf.UpdatedAt.Format(time.RFC3339))
				err := e.end(ctx, d, wf, Next{status: weirtype.WorkflowFailed, keepData: true, reason: reason})
				switch {
				case errors.Is(err, store.ErrConflict):
					continue // it moved on meanwhile
				case err != nil:
					return failed, err
				}
				failed++
				e.log.Warn("gave up a stalled workflow", "workflow", wf.ID, "state", wf.State, "reason", reason)
				if d.OnStall != nil {
					if err := d.OnStall(ctx, wf); err != nil {
						e.log.Error("clean up a stalled workflow", "workflow", wf.ID, "err", err.Error())
					}
				}
			}
			if len(wfs) < 500 {
				break
			}
			after = wfs[len(wfs)-1].ID
		}
	}
	return failed, nil
}

// work runs the state of a step job. The engine's own reads and writes
// of the workflow are not cut short by the attempt's timeout: one that
// outlasts it, on the last attempt, would end the step's job with the
// workflow left running.
func (e *Engine) work(ctx context.Context, job *weir.Job[stepArgs]) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	wf, err := e.st.Executor().GetWorkflow(rctx, job.Args.Workflow)
	cancel()
	if ctx.Err() != nil && !attemptTimedOut(ctx) {
		return ctx.Err() // stopped, cancelled or the lease lost: the client settles the job
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return retry.Permanent(fmt.Errorf("workflow %s: not found", job.Args.Workflow))
	case err != nil && transient(err):
		return e.storeFailed(job.Args.Workflow, "read the workflow", err)
	case err != nil:
		return err
	}
	if wf.Status != weirtype.WorkflowRunning || wf.Version != job.Args.Version {
		if wf.Status == weirtype.WorkflowFailed && wf.Version == job.Args.Version+1 {
			// This state failed it, and the process died before the
			// step's job was abandoned: abandon it now, so that the
			// dead-letter store shows the failed step.
			return retry.Permanent(fmt.Errorf("workflow %s failed in state %s: %s", wf.ID, wf.State, wf.Error))
		}
		return nil // a run of this state moved it on already
	}
	d := e.defs[wf.Name]
	if d == nil {
		return retry.Permanent(fmt.Errorf("workflow %s: no definition %q in this process", wf.ID, wf.Name))
	}
	h := d.States[wf.State]
	if h == nil {
		err := fmt.Errorf("workflow %s: definition %q has no state %q", wf.ID, wf.Name, wf.State)
		return e.failOn(ctx, d, wf, retry.Permanent(err))
	}
	next, err := runState(ctx, h, &Run{Workflow: wf, Ledger: e.ledger, Attempt: job.Attempt})
	if err != nil {
		if retry.IsPermanent(err) || job.Attempt >= job.MaxAttempts {
			return e.failOn(ctx, d, wf, err)
		}
		return err
	}
	if next.status == weirtype.WorkflowRunning && d.States[next.state] == nil {
		err := fmt.Errorf("workflow %s: state %s went to %q, which definition %q does not have", wf.ID, wf.State, next.state, d.Name)
		return e.failOn(ctx, d, wf, retry.Permanent(err))
	}
	crashpoint.Hit(crashpoint.WorkflowMidTransition)
	// The state's work is done: its transition is written even if the
	// attempt's context ended meanwhile (the version guards it).
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	err = e.end(wctx, d, wf, next)
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil // another run of this state moved it on first
	case err != nil && transient(err):
		return e.storeFailed(wf.ID, "write the transition", err)
	}
	return err
}

// runState runs h, turning a panic into an error, so that a panic on the
// last attempt fails the workflow like any error.
func runState(ctx context.Context, h Handler, r *Run) (next Next, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("state %s panicked: %v", r.Workflow.State, p)
		}
	}()
	return h(ctx, r)
}

// failOn ends wf as failed with err, and returns err for the step's job
// to fail with; or nil when another run moved wf on first. The write is
// not cut short by ctx, which a step's timeout may have ended. When the
// write fails, the step's job must not fail with err, which would end it
// (err permanent, or the attempt the last) with its workflow left
// running: the step runs again instead (see storeFailed), and its next
// run fails the workflow.
func (e *Engine) failOn(ctx context.Context, d *Definition, wf *weirtype.Workflow, err error) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	eerr := e.end(wctx, d, wf, Next{status: weirtype.WorkflowFailed, keepData: true, reason: err.Error()})
	switch {
	case errors.Is(eerr, store.ErrConflict):
		return nil
	case eerr != nil && transient(eerr):
		return e.storeFailed(wf.ID, "write the failure ("+err.Error()+")", eerr)
	case eerr != nil:
		// Trying again cannot help; Resume fails the workflow once it
		// finds its step's job ended.
		e.log.Error("could not write a workflow's failure", "workflow", wf.ID, "state", wf.State, "err", eerr.Error())
		return errors.Join(err, eerr)
	}
	e.log.Warn("workflow failed", "workflow", wf.ID, "state", wf.State, "err", err.Error())
	return err
}

// storeTimeout bounds the engine's own reads and writes of a step's
// workflow, which the attempt's context does not.
const storeTimeout = 10 * time.Second

// attemptTimedOut reports whether the attempt's context ctx ended at the
// step's timeout or its job's deadline.
func attemptTimedOut(ctx context.Context) bool {
	var timeout *weir.TimeoutError
	var deadline *weir.DeadlineError
	cause := context.Cause(ctx)
	return errors.As(cause, &timeout) || errors.As(cause, &deadline)
}

// storeRetryAfter is how long a step waits to run again when the engine's
// own read or write of its workflow failed.
const storeRetryAfter = time.Second

// storeFailed is what a step returns when the engine's own read or write
// of workflow id failed with err, an error of the store's that trying
// again may mend (a lost connection, a server restarting): a snooze of
// storeRetryAfter, so that the step's job runs again without spending an
// attempt. A failure of the database is never taken for the state's: it
// neither fails the workflow nor ends its step's job, which would leave
// the workflow running with no job to move it on.
func (e *Engine) storeFailed(id, what string, err error) error {
	e.log.Warn("workflow step: the store failed; the step runs again", "workflow", id, "op", what,
		"retry_in", storeRetryAfter, "err", err.Error())
	return fmt.Errorf("workflow %s: %s: %v: %w", id, what, err, weir.JobSnooze(storeRetryAfter))
}

// transient reports whether err, a store's, may pass if the call is made
// again: any error but a bad parameter or a missing row.
func transient(err error) bool {
	return !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrNotFound)
}

// end makes the transition next of wf in one transaction: the new context,
// and the next state's job or, when the workflow ends, its notification.
// It returns store.ErrConflict when wf moved on meanwhile.
func (e *Engine) end(ctx context.Context, d *Definition, wf *weirtype.Workflow, next Next) error {
	data := next.data
	if next.keepData {
		data = wf.Data
	}
	state := next.state
	if state == "" {
		state = wf.State
	}
	return e.st.InTx(ctx, func(ex store.Executor) error {
		moved, err := ex.AdvanceWorkflow(ctx, e.clock.Now(), store.AdvanceParams{ID: wf.ID, Version: wf.Version, State: state,
			Status: next.status, Data: data, Error: next.reason})
		if err != nil {
			return fmt.Errorf("workflow %s: %w", wf.ID, err)
		}
		if moved.Status == weirtype.WorkflowRunning {
			_, err := e.insertStep(ctx, ex, moved)
			return err
		}
		if d.NotifyTopic == "" {
			return nil
		}
		body, err := json.Marshal(Notification{Workflow: moved.ID, Name: moved.Name, Status: moved.Status, State: moved.State,
			Error: moved.Error, Data: jsonOrNil(moved.Data)})
		if err != nil {
			return err
		}
		_, err = outbox.Add(ctx, ex, e.clock.Now(), store.OutboxMessage{Topic: d.NotifyTopic, Key: moved.ID, Payload: body,
			Headers: map[string]string{"Weir-Workflow": moved.ID}})
		return err
	})
}

// jsonOrNil returns b when it is JSON, for the notification to carry, and
// nil otherwise.
func jsonOrNil(b []byte) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return b
}
