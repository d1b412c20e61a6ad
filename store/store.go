package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/weirtype"
)

// Sentinel errors. Drivers translate their own errors into these at the
// boundary; callers use errors.Is.
var (
	// ErrNotFound: no job, or dead letter, has the id.
	ErrNotFound = errors.New("store: not found")
	// ErrSchemaTooNew: the database was migrated by a newer weir than this
	// one; it refuses to run rather than misread it.
	ErrSchemaTooNew = errors.New("store: database schema is newer than this weir")
	// ErrInvalid: a parameter is out of range; the error names it. It is
	// weirtype.ErrInvalid, so that the checks of the filters kept in
	// weirtype wrap it too.
	ErrInvalid = weirtype.ErrInvalid
	// ErrLeaseLost: the worker no longer holds the job's lease (it
	// expired and the job was rescued, released or cancelled), so the
	// worker may not finish it; another worker may hold it now.
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrFinal: the job is completed, cancelled or dead already.
	ErrFinal = errors.New("store: job is final")
	// ErrConflict: the job or workflow is no longer in the state the
	// operation needs (a late result's job that was requeued, completed or
	// purged since; a workflow another run moved on).
	ErrConflict = errors.New("store: changed since")
)

// Store is a database that keeps weir's jobs.
type Store interface {
	// Migrate applies the migrations the database lacks, each in its own
	// transaction, and returns how many it applied. It returns an error
	// wrapping ErrSchemaTooNew, changing nothing, when the database has
	// a migration this weir does not know.
	Migrate(ctx context.Context) (applied int, err error)
	// SchemaVersion returns the database's migration version and the
	// newest this weir knows.
	SchemaVersion(ctx context.Context) (current, latest int, err error)
	// Executor returns an Executor that runs each call in a transaction of
	// its own.
	Executor() Executor
	// Features declares what the driver supports.
	Features() Features
	// Close releases the store's connections.
	Close() error
}

// Transactor is a store that runs a function in one transaction of its
// own, with an Executor bound to it: what fn writes through the Executor
// commits if it returns nil, and rolls back otherwise. Both drivers are
// Transactors.
type Transactor interface {
	InTx(ctx context.Context, fn func(ex Executor) error) error
}

// Executor runs the engine's queries, on a pool or inside a caller's
// transaction. It is every role below; each consumer takes the narrowest
// role, or the few roles, it needs: the engine's client Jobs, Leases,
// Deadlines, Sweep, DeadLetters; an outbox relay Outbox; a consumer Inbox;
// the workflow engine Workflows and Jobs; the effect ledger Ledger; the
// metrics' scrape-time collector Sweep; an operator's tools DeadLetters,
// Operator, Pauses and Limits.
type Executor interface {
	Jobs
	Leases
	Deadlines
	Sweep
	Outbox
	Inbox
	Workflows
	Ledger
	DeadLetters
	Operator
	Results
	Retention
	Pauses
	Limits
}

// Jobs inserts, reads and cancels jobs: what a client that only inserts
// needs (Client.Insert, InsertTx, Cancel).
type Jobs interface {
	// Insert inserts jobs at time now, all or none. For a job with an
	// idempotency key the check and the insert are one atomic step: of
	// any number of concurrent inserts of one key, exactly one makes the
	// job. Results are in the order of jobs.
	Insert(ctx context.Context, now time.Time, jobs []InsertParams) ([]InsertResult, error)

	// GetJob returns the job with the id, or an error wrapping
	// ErrNotFound.
	GetJob(ctx context.Context, id int64) (*weirtype.Job, error)

	// Cancel makes a job that is not final cancelled, whoever holds it (a
	// running job's worker then finds its lease lost). ErrFinal, changing
	// nothing, for a final job; ErrNotFound for a missing one.
	Cancel(ctx context.Context, now time.Time, id int64) (*weirtype.Job, error)
}

// Leases is the worker's side of the job lifecycle: claiming jobs under
// leases, keeping the leases alive, recording each attempt's outcome, and
// taking back the jobs whose leases expired or whose owner stopped.
type Leases interface {
	// Claim takes up to Limit jobs of the queue that may run at Now: those
	// available, and those scheduled whose ScheduledAt is not after Now;
	// higher Priority first, then earlier ScheduledAt, then lower id. Each
	// becomes running, its Attempt one more, AttemptedAt Now, held by
	// Owner until Now+LeaseFor. Concurrent claims never take the same job
	// (PostgreSQL: FOR UPDATE SKIP LOCKED).
	Claim(ctx context.Context, p ClaimParams) ([]*weirtype.Job, error)

	// Heartbeat extends to now+leaseFor each of the leases still held,
	// and returns the job ids of those no longer held (their handlers
	// must stop).
	Heartbeat(ctx context.Context, now time.Time, leases []Lease, leaseFor time.Duration) (lost []int64, err error)

	// Complete makes the job of a lease still held completed, with
	// FinalizedAt now and the lease dropped. It returns ErrLeaseLost,
	// changing nothing, when the lease is no longer held.
	Complete(ctx context.Context, now time.Time, l Lease) (*weirtype.Job, error)

	// CompleteMany completes, as Complete does and in one transaction,
	// the job of each of the leases still held, and returns the ids of
	// the jobs it did not complete, their leases lost (in the order of
	// leases, each once), changing nothing for them. It lets a worker
	// commit many completions at once.
	CompleteMany(ctx context.Context, now time.Time, leases []Lease) (lost []int64, err error)

	// Fail records a failed attempt of a job whose lease is held: the error
	// is appended to the job's errors and the lease dropped. With an empty
	// Abandon the job is scheduled to run again at RetryAt (available if
	// that is not after Now); with a reason, the job becomes dead and a
	// dead letter is written in the same transaction. ErrLeaseLost when
	// the lease is no longer held.
	Fail(ctx context.Context, p FailParams) (*weirtype.Job, error)

	// Snooze puts the job of a lease still held back to scheduled at
	// until, giving back the attempt it used (Attempt one less) and
	// dropping the lease. ErrLeaseLost when the lease is no longer held.
	Snooze(ctx context.Context, now time.Time, l Lease, until time.Time) (*weirtype.Job, error)

	// RescueExpired takes up to limit running jobs whose lease ended
	// before now. Each with attempts left becomes available at now, with
	// an error of type lease_expired recorded for the attempt that did
	// not finish; each without becomes dead, with a dead letter of reason
	// max_attempts_exceeded. It returns both kinds, each job with its kind
	// and queue, in id order.
	RescueExpired(ctx context.Context, now time.Time, limit int) (rescued, dead []JobRef, err error)

	// ReleaseOwned makes every running job that owner holds available at
	// now, with an error of type released recorded. With giveBack the
	// attempt is given back (a graceful shutdown that ran out of time);
	// without, it counts (a restarted process taking back what its
	// previous run held), and a job whose counted attempt was its last
	// becomes dead instead, with a dead letter of reason
	// max_attempts_exceeded, as RescueExpired does. It returns the ids of
	// all.
	ReleaseOwned(ctx context.Context, now time.Time, owner string, giveBack bool) ([]int64, error)

	// ReleaseOwnedExcept gives back, at now, every running job that owner
	// holds at a lease not among keep: as ReleaseOwned with giveBack, each
	// becomes available at now, its attempt given back, with an error of
	// type released recorded. A worker calls it with the leases it runs,
	// to give back the jobs a claim took for it whose reply it never
	// received (a connection cut after the claim committed), at once
	// rather than after their leases expire. It returns the ids, in
	// ascending order.
	ReleaseOwnedExcept(ctx context.Context, now time.Time, owner string, keep []Lease) ([]int64, error)
}

// CompletingClaimer is an Executor that can write completions and make a
// claim in one transaction and one round trip. With a store that has
// nothing else the client gets the same outcome from CompleteMany then
// Claim; with it, the successes that wait for the next claim ride with
// it, one commit instead of two (the database's CPU per job at a steady
// rate is mostly its commits and round trips). Optional: the client uses
// it when its store's Executor has it. A reply lost after the commit is
// as a lost reply of Claim and of CompleteMany: the caller cannot tell
// that it committed.
type CompletingClaimer interface {
	// CompleteAndClaim completes, as CompleteMany does at p.Now, the jobs
	// of the leases done still held, then claims as Claim does with p,
	// all or nothing: on an error nothing was completed or claimed. It
	// returns the ids of the jobs of done it did not complete, as
	// CompleteMany does, and the jobs claimed.
	CompleteAndClaim(ctx context.Context, done []Lease, p ClaimParams) (lost []int64, jobs []*weirtype.Job, err error)
}

// Deadlines abandons the jobs past their deadline and keeps the late
// results of attempts that succeeded after it.
type Deadlines interface {
	// ExpireDeadlines abandons, with reason deadline_exceeded, up to limit
	// jobs that are not final and whose DeadlineAt is set and before now,
	// oldest deadline first. Each becomes dead, with an error of type
	// deadline_exceeded recorded for its current attempt and a dead letter
	// written in the same transaction. A running job keeps its LeaseOwner
	// and Attempt (its lease expiry is cleared, so heartbeats report the
	// lease lost), so that a success of that attempt is recognised as late
	// by CompleteLate. It returns the jobs, each with its kind and queue,
	// oldest deadline first, then by id.
	ExpireDeadlines(ctx context.Context, now time.Time, limit int) ([]JobRef, error)

	// CompleteLate records the success of an attempt that finished after
	// its job's deadline. If the lease is still held, the job is first
	// abandoned at now as ExpireDeadlines does. Then, if the job is dead
	// past its deadline at the lease's Attempt and Owner, a late result is
	// stored (once per job and attempt: a second call returns the first
	// result) and returned, the job left dead. Otherwise it returns
	// ErrLeaseLost, changing nothing. A held lease whose job has no
	// deadline, or one not passed at now, is ErrInvalid (see CheckLate):
	// the attempt is not late. abandoned reports whether this call
	// abandoned the job (its lease was still held), rather than found it
	// abandoned by ExpireDeadlines.
	CompleteLate(ctx context.Context, now time.Time, l Lease) (lr *weirtype.LateResult, abandoned bool, err error)

	// ListLateResults returns the late results that match f, lowest id
	// first.
	ListLateResults(ctx context.Context, f LateResultFilter) ([]*weirtype.LateResult, error)

	// AcceptLateResult applies the late result with the id: its job,
	// still dead past its deadline at the result's attempt, becomes
	// completed at now, its dead letters are deleted, and the result is
	// marked accepted at now. ErrNotFound for a missing result; ErrFinal
	// for one accepted already; ErrConflict, changing nothing, when the
	// job was requeued, completed or purged since.
	AcceptLateResult(ctx context.Context, now time.Time, id int64) (*weirtype.LateResult, error)
}

// Sweep finds the jobs that are stuck (the stuck sweep, the job-count
// gauges).
type Sweep interface {
	// ListStuck returns up to limit running jobs whose latest attempt
	// started before before, oldest first: their handler has not
	// finished, though heartbeats may still hold the lease. (Waiting jobs
	// stuck unclaimed are counted by CountJobs.)
	ListStuck(ctx context.Context, before time.Time, limit int) ([]*weirtype.Job, error)

	// CountJobs counts the jobs by queue, kind and state, and of each
	// group those stuck since before stuckBefore: running jobs whose
	// attempt started before it, and available or scheduled jobs due
	// (ScheduledAt) before it.
	CountJobs(ctx context.Context, stuckBefore time.Time) ([]JobCount, error)
}

// Outbox adds messages in the caller's transaction, and lets a relay
// claim, publish, retry and purge them.
type Outbox interface {
	// AddOutbox adds messages to the outbox at now, all or none, and
	// returns their ids in order: in the caller's transaction (an Executor
	// bound to it), they commit or roll back with the caller's data.
	AddOutbox(ctx context.Context, now time.Time, msgs []OutboxMessage) ([]int64, error)

	// ClaimOutbox takes up to Limit unpublished messages due at Now (their
	// NextAttemptAt not after it), held by no live lease and not among
	// Holding, lowest id first, and holds them for Owner until
	// Now+LeaseFor. A message with a Key is taken only with every earlier
	// unpublished message of its key, so that a key's messages are
	// published in commit order: none is taken while an earlier one of its
	// key is held (by another relay, or by Owner through Holding) or waits
	// out a backoff. Concurrent claims never take one message twice.
	//
	// Where Features().ConcurrentRelays is false (SQLite, whose single
	// writer several relays could not share anyway) the lease is on the
	// whole outbox: the claim takes or renews it for Owner until
	// Now+LeaseFor, returns nothing while another owner's lease lasts, and
	// writes nothing to the messages it returns, so Owner must pass the
	// ids it still holds as Holding. Once the lease ends another owner may
	// take the outbox, with the messages the first held.
	ClaimOutbox(ctx context.Context, p OutboxClaimParams) ([]*weirtype.OutboxMessage, error)

	// MarkPublished marks published at now the messages ids that owner
	// holds, drops their leases (where leases are per message), and
	// returns how many it marked. A lease that has ended still holds
	// until another owner claims.
	MarkPublished(ctx context.Context, now time.Time, owner string, ids []int64) (int, error)

	// RetryOutbox records a failed publish of the messages ids that owner
	// holds: their attempt counts grow by one, lastError is kept, their
	// leases are dropped and they are due again at retryAt. It returns
	// how many it updated.
	RetryOutbox(ctx context.Context, now time.Time, owner string, ids []int64, lastError string, retryAt time.Time) (int, error)

	// ReleaseOutbox gives back the messages ids that owner holds, with no
	// attempt counted, for any relay to claim at once, and returns how
	// many it gave back. Where Features().ConcurrentRelays is false it
	// ends owner's lease on the outbox, which gives back all it holds.
	ReleaseOutbox(ctx context.Context, now time.Time, owner string, ids []int64) (int, error)

	// PurgeOutbox deletes up to limit messages published before before,
	// oldest first, and returns how many it deleted.
	PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error)

	// OutboxBacklog returns how many messages of the outbox are not
	// published yet, and when the oldest of them was added.
	OutboxBacklog(ctx context.Context) (OutboxBacklog, error)

	// OutboxIdentity returns the store's identity, which the outbox relay
	// puts in each message's broker id so that no two stores give two
	// messages one id; see OutboxIdentity.
	OutboxIdentity(ctx context.Context) (OutboxIdentity, error)
}

// Inbox records the messages a consumer handled, so that a redelivered
// message is handled once.
type Inbox interface {
	// RecordInbox records, at now, that the message id of topic was
	// handled, and reports whether this was the first time: false means a
	// duplicate (the record exists), changing nothing. In the consumer's
	// transaction, the record commits with the handler's effects.
	RecordInbox(ctx context.Context, now time.Time, topic, id string) (first bool, err error)

	// PurgeInbox deletes up to limit inbox records made before before and
	// returns how many it deleted.
	PurgeInbox(ctx context.Context, before time.Time, limit int) (int, error)
}

// Workflows keeps multi-step workflows as state machines, with their
// history.
type Workflows interface {
	// CreateWorkflow creates the workflow p.ID, running in p.State, at now,
	// unless one with that id exists, and returns the workflow with
	// whether this call made it. The check and the insert are one atomic
	// step. In the caller's transaction, the workflow commits with the
	// caller's data.
	CreateWorkflow(ctx context.Context, now time.Time, p WorkflowParams) (wf *weirtype.Workflow, created bool, err error)

	// GetWorkflow returns the workflow with the id, or ErrNotFound.
	GetWorkflow(ctx context.Context, id string) (*weirtype.Workflow, error)

	// AdvanceWorkflow moves the running workflow p.ID from p.Version to
	// p.State, p.Status, p.Data and p.Error at now, its version one more,
	// and returns it. It returns ErrConflict, changing nothing, when the
	// workflow is not running at p.Version (another run moved it on), and
	// ErrNotFound when there is none.
	AdvanceWorkflow(ctx context.Context, now time.Time, p AdvanceParams) (*weirtype.Workflow, error)

	// ListWorkflows returns the workflows that match f, lowest id first.
	ListWorkflows(ctx context.Context, f WorkflowFilter) ([]*weirtype.Workflow, error)

	// ListWorkflowTransitions returns the history of the workflow id,
	// oldest (lowest version) first: its creation (version 1, FromState
	// empty) and each transition AdvanceWorkflow made, each written in
	// the same transaction as the change it records, so the history never
	// misses a committed change nor holds one rolled back. Up to limit
	// entries after version afterVersion (limit 0: all). A workflow with
	// no history (unknown, or older than the history itself: created and
	// advanced by a weir that kept none) has an empty one.
	ListWorkflowTransitions(ctx context.Context, id string, afterVersion int64, limit int) ([]*WorkflowTransition, error)
}

// Ledger is the effect ledger: each keyed side effect is done once.
type Ledger interface {
	// BeginEffect records, at now, that the effect k is about to run and
	// returns its record. When k was begun before, it returns that record
	// instead, with begun false: finished, it holds the result to use
	// instead of running the effect again; unfinished (a run cut short
	// between the effect and its result), its Attempts grows by one and
	// the caller must resolve it. Concurrent calls for one key begin it
	// once.
	BeginEffect(ctx context.Context, now time.Time, k EffectKey) (rec *weirtype.Effect, begun bool, err error)

	// FinishEffect records result for the begun effect k at now and
	// returns the record. An effect finished already keeps its first
	// result, which is returned. It returns ErrNotFound when k was never
	// begun.
	FinishEffect(ctx context.Context, now time.Time, k EffectKey, result string) (*weirtype.Effect, error)

	// ListEffects returns the effects of txn, by series then ordinal.
	ListEffects(ctx context.Context, txn string) ([]*weirtype.Effect, error)

	// CountEffects returns, for each series of txn, how many of its
	// effects are finished.
	CountEffects(ctx context.Context, txn string) (map[string]int, error)
}

// DeadLetters lists, shows, requeues and purges the dead-letter store.
type DeadLetters interface {
	// GetDeadLetter returns the dead letter with the id, or ErrNotFound.
	GetDeadLetter(ctx context.Context, id int64) (*weirtype.DeadLetter, error)

	// ListDeadLetters returns the dead letters that match f, lowest id
	// first.
	ListDeadLetters(ctx context.Context, f DeadLetterFilter) ([]*weirtype.DeadLetter, error)

	// RequeueDeadLetters makes the jobs of the dead letters that match f
	// available at now with their attempts reset to zero, their deadline
	// cleared (it passed, or will soon: the operator decides anew) and an
	// error of type requeued, attempt 0, appended to their error history,
	// deletes those dead letters, and returns the job ids.
	RequeueDeadLetters(ctx context.Context, now time.Time, f DeadLetterFilter) ([]int64, error)

	// PurgeDeadLetters deletes the dead letters that match f, and their
	// jobs, and returns how many dead letters it deleted.
	PurgeDeadLetters(ctx context.Context, f DeadLetterFilter) (int, error)
}

// Operator lists jobs and runs them again: what an operator's tools (the
// admin API, the CLI) do beside the dead-letter store.
type Operator interface {
	// ListJobs returns up to f.Limit jobs that match f, newest (highest
	// id) first; pass the last id returned as the next page's f.Before.
	// An unknown state in f.States, or a negative Limit or Before, is an
	// error wrapping ErrInvalid that names it.
	ListJobs(ctx context.Context, f JobFilter) ([]*weirtype.Job, error)

	// RetryJob makes the job with the id run again at now, by state:
	//
	//   - available: nothing changes; the job is returned as it is.
	//   - scheduled: available at now; its attempts, deadline and errors
	//     are kept.
	//   - completed, cancelled, dead: available at now, its finalized
	//     time, lease and deadline cleared (the deadline passed, or will
	//     soon: the operator decides anew, as for a requeue). Its attempt
	//     count is kept, not reset, so that a lease of an earlier attempt
	//     (a cancelled job's handler still running, say) can never finish
	//     the next one; MaxAttempts is raised to Attempt+1 when no attempt
	//     is left, so the job gets at least one more (River's JobRetry
	//     raises it the same way). An error of type
	//     weirtype.ErrorTypeRetried, with the job's Attempt, is appended
	//     to its history. A dead job's dead letters are deleted in the
	//     same transaction, as RequeueDeadLetters deletes those it
	//     requeues, so the dead-letter store never lists a job that is
	//     waiting to run.
	//   - running: an error wrapping ErrConflict, changing nothing: it is
	//     in flight; cancel it first.
	//
	// A missing job is ErrNotFound. Unlike RequeueDeadLetters, which
	// starts a dead job's attempts again from 1, RetryJob gives a job one
	// more go at its remaining attempts.
	RetryJob(ctx context.Context, now time.Time, id int64) (*weirtype.Job, error)
}

// The parameter and result types that users of the engine see too live in
// weirtype; these aliases keep their store names.
type (
	// InsertResult is what one insert did, and the job it found or made.
	InsertResult = weirtype.InsertResult
	// JobFilter selects jobs for Operator.ListJobs.
	JobFilter = weirtype.JobFilter
	// DeadLetterFilter selects dead letters.
	DeadLetterFilter = weirtype.DeadLetterFilter
	// LateResultFilter selects late results.
	LateResultFilter = weirtype.LateResultFilter
)

// Limits of JobFilter.Limit.
const (
	DefaultJobListLimit = weirtype.DefaultJobListLimit
	MaxJobListLimit     = weirtype.MaxJobListLimit
)

// ClaimParams is what Claim takes.
type ClaimParams struct {
	Now      time.Time
	Queue    string // default "default"
	Limit    int    // at least 1
	Owner    string // required: the worker process's id
	LeaseFor time.Duration
	// From, when set, is a hint: the place in the claim order where the
	// caller's last claim of the queue began (ClaimFromJob of the first
	// job it took). A store may then start its search there and pass
	// over the jobs ordered before it, so that a claim does not read
	// again the traces of the jobs claimed before (PostgreSQL's index
	// entries of finished attempts, kept until a vacuum). A caller that
	// gives hints claims without one now and then: a job ordered before
	// the hint (of a higher priority inserted since, or taken back with
	// its old place) waits for that claim, and so do, on PostgreSQL, a
	// breaker's probe and the kinds a limit holds, which only a claim
	// from the head takes. SQLite ignores it.
	From ClaimFrom
}

// ClaimFrom is a place in the claim order: higher Priority first, then
// earlier ScheduledAt, then lower ID. The zero value is no place.
type ClaimFrom struct {
	Priority    int
	ScheduledAt time.Time
	ID          int64
}

// ClaimFromJob is the place of j in the claim order.
func ClaimFromJob(j *weirtype.Job) ClaimFrom {
	return ClaimFrom{Priority: j.Priority, ScheduledAt: j.ScheduledAt, ID: j.ID}
}

// IsZero reports whether f is no place.
func (f ClaimFrom) IsZero() bool { return f == ClaimFrom{} }

// Lease names one attempt of a running job and the worker that holds it.
// A lease is held while the job is running, by Owner, at Attempt: once the
// job is rescued, released or cancelled, the lease is lost, and stays lost
// even if the same owner claims the job again for a later attempt, so that
// a stale handler can never finish the newer attempt.
type Lease struct {
	ID      int64
	Owner   string
	Attempt int
}

// LeaseOf returns the lease of a job as Claim returned it.
func LeaseOf(j *weirtype.Job) Lease {
	return Lease{ID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}
}

// LostIDs returns the ids of the jobs of leases for which held reports
// false, in the order of leases, each once: what a store's Heartbeat and
// CompleteMany return for the leases they did not find held.
func LostIDs(leases []Lease, held func(Lease) bool) []int64 {
	var lost []int64
	for _, l := range leases {
		if !held(l) && !slices.Contains(lost, l.ID) {
			lost = append(lost, l.ID)
		}
	}
	return lost
}

// FailParams is what Fail takes.
type FailParams struct {
	Now   time.Time
	Lease Lease
	// Error is the attempt's error, appended to the job's errors.
	Error weirtype.AttemptError
	// RetryAt is when the job may run again, when it is not abandoned;
	// zero means at once.
	RetryAt time.Time
	// Abandon, when set, abandons the job to the dead-letter store for
	// this reason instead of retrying it.
	Abandon weirtype.AbandonReason
}

// OutboxMessage is a message to publish through the outbox.
type OutboxMessage struct {
	// Topic is where the message goes. Required.
	Topic string
	// Key orders messages: those of one key are published in commit
	// order. Optional.
	Key string
	// Payload is the message's body.
	Payload []byte
	// Headers are carried to the broker.
	Headers map[string]string
}

// OutboxClaimParams is what ClaimOutbox takes.
type OutboxClaimParams struct {
	Now      time.Time
	Limit    int    // at least 1
	Owner    string // required: the relay's id
	LeaseFor time.Duration
	// Holding are the ids Owner claimed before and has neither marked
	// published nor retried yet (a batch still being published): they
	// are not taken again, and the later messages of their keys wait.
	Holding []int64
}

// WorkflowParams is a workflow to create.
type WorkflowParams struct {
	// ID names the workflow. Required.
	ID string
	// Name is its definition's name. Required.
	Name string
	// State is the state it starts in. Required.
	State string
	// Data is its user data, at most weirtype.MaxWorkflowData bytes.
	Data []byte
}

// AdvanceParams is a workflow's transition.
type AdvanceParams struct {
	ID string
	// Version is the version the transition starts from.
	Version int64
	// State, Status, Data and Error are the workflow's after it. State is
	// required; Status defaults to running.
	State  string
	Status weirtype.WorkflowStatus
	Data   []byte
	Error  string
}

// WorkflowFilter selects workflows. Zero fields match everything.
type WorkflowFilter struct {
	Name   string
	Status weirtype.WorkflowStatus
	// UpdatedBefore keeps those last updated before it: running ones that
	// made no progress since, say.
	UpdatedBefore time.Time
	// AfterID and Limit page: ids greater than AfterID, at most Limit of
	// them (0: no limit).
	AfterID string
	Limit   int
}

// WorkflowTransition is one entry of a workflow's history: its creation,
// or a transition AdvanceWorkflow made.
type WorkflowTransition struct {
	WorkflowID string
	// Version is the workflow's version the entry made: 1 for its
	// creation, one more for each transition.
	Version int64
	// FromState is the state it left; empty at creation.
	FromState string
	// State, Status and Error are the workflow's after the entry.
	State  string
	Status weirtype.WorkflowStatus
	Error  string
	// At is when it happened.
	At time.Time
}

// OutboxBacklog is the outbox's unpublished messages.
type OutboxBacklog struct {
	// Pending is how many messages are not published yet.
	Pending int
	// OldestCreatedAt is when the oldest of them was added; zero when
	// there are none.
	OldestCreatedAt time.Time
}

// OutboxIdentity is what makes the broker ids of a store's outbox
// messages its own: the relay gives a message the id
// "<Source>-<StoreID>-<outbox id>", or "<Source>-<outbox id>" when its
// outbox id is at most LegacyThrough.
type OutboxIdentity struct {
	// StoreID is 16 random hex digits, made by the migration that created
	// it and never changed: another store, or a store made again in place
	// of a deleted one (whose outbox ids start again at 1), has another.
	StoreID string
	// LegacyThrough is the highest outbox id when the store got its
	// StoreID: the messages up to it were added by an earlier weir, which
	// gave them the broker id "<Source>-<outbox id>", and keep it, so
	// that a republish of one is still a duplicate. Zero in a store made
	// by this weir.
	LegacyThrough int64
}

// EffectKey identifies a side effect in the ledger.
type EffectKey struct {
	Txn    string // required
	Series string
	// Ordinal places the effect in its series; 0 for an effect alone.
	Ordinal int64
}

// JobRef is a job that a call changed in bulk (RescueExpired,
// ExpireDeadlines), with what the engine logs and counts it by, so that it
// need not read the job back.
type JobRef struct {
	ID    int64
	Kind  string
	Queue string
}

// JobCount is how many jobs of a queue and kind are in a state, and how
// many of those are stuck.
type JobCount struct {
	Queue string
	Kind  string
	State weirtype.State
	Count int
	Stuck int
}

// Notifier is implemented by a store whose database wakes waiting workers
// itself (Features.Notify): PostgreSQL's LISTEN/NOTIFY.
type Notifier interface {
	// Listen calls wake with the queue of every job that becomes
	// available by an insert, in any process, until ctx ends; it returns
	// ctx's error then, or an error when it cannot listen (the caller
	// falls back to polling and may call Listen again). It calls ready
	// once it listens, before any wake.
	Listen(ctx context.Context, ready func(), wake func(queue string)) error
}

// Features are the capabilities a driver declares.
type Features struct {
	// Name is the driver's name: "sqlite" or "postgres".
	Name string
	// ConcurrentWriters is true when several processes can write at once
	// (PostgreSQL); SQLite serialises writers.
	ConcurrentWriters bool
	// Notify is true when the database itself can wake waiting workers
	// (PostgreSQL LISTEN/NOTIFY); otherwise the engine signals in process
	// and polls.
	Notify bool
	// ConcurrentRelays is true when several outbox relays can claim at
	// once, each holding its own messages (PostgreSQL); otherwise one
	// relay at a time holds the whole outbox (see Outbox.ClaimOutbox).
	ConcurrentRelays bool
}

// Defaults for InsertParams.
const (
	DefaultQueue       = "default"
	DefaultMaxAttempts = 25
	DefaultStuckAfter  = 10 * time.Minute
)

// InsertParams is a job to insert.
type InsertParams struct {
	// Kind names the job's handler. Required.
	Kind string
	// Queue is the queue the job waits in. Default "default".
	Queue string
	// Payload is the job's arguments as JSON. Default {}.
	Payload json.RawMessage
	// MaxAttempts is how many attempts the job gets. Default 25.
	MaxAttempts int
	// IdempotencyKey, when set, makes the insert find an existing job with
	// the same key instead of making a second one (see the outcomes in
	// weirtype).
	IdempotencyKey string
	// Source says where the job came from, for operators.
	Source string
	// Priority orders available jobs: higher runs first. Default 0.
	Priority int
	// ScheduledAt is when the job may first run. Zero means now; a time
	// after now makes the job scheduled.
	ScheduledAt time.Time
	// DeadlineAt is the job's SLA; zero for none.
	DeadlineAt time.Time
	// StuckAfter is how long a running job may go without finishing before
	// an insert of its key reclaims it, which it does only when no worker
	// holds the job: its lease has expired (or it has none). A job whose
	// lease heartbeats keep alive is never reclaimed by an insert. Default
	// 10 minutes.
	StuckAfter time.Duration
}

// Normalize returns p with its defaults filled in, or an error wrapping
// ErrInvalid that names the bad field. Drivers call it on every job before
// writing anything.
func (p InsertParams) Normalize() (InsertParams, error) {
	if p.Kind == "" {
		return p, fmt.Errorf("%w: kind is empty", ErrInvalid)
	}
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if len(p.Payload) == 0 {
		p.Payload = json.RawMessage("{}")
	}
	if !json.Valid(p.Payload) {
		return p, fmt.Errorf("%w: payload of kind %q is not valid JSON", ErrInvalid, p.Kind)
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxAttempts < 0 {
		return p, fmt.Errorf("%w: max attempts %d is negative", ErrInvalid, p.MaxAttempts)
	}
	if p.StuckAfter == 0 {
		p.StuckAfter = DefaultStuckAfter
	}
	if p.StuckAfter < 0 {
		return p, fmt.Errorf("%w: stuck-after %v is negative", ErrInvalid, p.StuckAfter)
	}
	return p, nil
}

// ScheduledFor is when a job inserted at now is scheduled: p.ScheduledAt,
// or now when it is unset.
func (p InsertParams) ScheduledFor(now time.Time) time.Time {
	if p.ScheduledAt.IsZero() {
		return now
	}
	return p.ScheduledAt
}

// InitialState is the state a new job starts in at time now: scheduled when
// it may not run yet, available otherwise.
func (p InsertParams) InitialState(now time.Time) weirtype.State {
	if p.ScheduledAt.After(now) {
		return weirtype.StateScheduled
	}
	return weirtype.StateAvailable
}

// IDsOf returns the ids of jobs, in their order.
func IDsOf(jobs []JobRef) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}
