package weirtype

import "time"

// WorkflowStatus is where a workflow stands as a whole.
type WorkflowStatus string

// The workflow statuses. Completed and failed are final.
const (
	WorkflowRunning   WorkflowStatus = "running"
	WorkflowCompleted WorkflowStatus = "completed"
	WorkflowFailed    WorkflowStatus = "failed"
)

// Valid reports whether s is one of the statuses.
func (s WorkflowStatus) Valid() bool {
	return s == WorkflowRunning || s == WorkflowCompleted || s == WorkflowFailed
}

// Final reports whether s is completed or failed.
func (s WorkflowStatus) Final() bool { return s == WorkflowCompleted || s == WorkflowFailed }

// Workflow is the persisted context of a multi-step transaction: written
// at every transition, so that a restart resumes it from State.
type Workflow struct {
	// ID names the workflow; the caller chooses it (a document's id, say)
	// and it is stable across restarts.
	ID string
	// Name is the workflow's definition, whose handlers run it.
	Name string
	// State is the state it is in: the next handler to run.
	State  string
	Status WorkflowStatus
	// Data is the workflow's small user data (at most MaxWorkflowData
	// bytes), as its handlers left it.
	Data []byte
	// Version grows by one at every transition; a transition names the
	// version it starts from, so two runs of one state cannot both move
	// the workflow on.
	Version int64
	// Error is why it failed.
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MaxWorkflowData bounds Workflow.Data: the context is small, and what is
// large belongs in the caller's tables or the effect ledger.
const MaxWorkflowData = 64 << 10

// Effect is the ledger's record of one side effect outside the database
// (an upload, an index write, a notification): begun before the effect
// runs, finished with its result after.
type Effect struct {
	// Txn, Series and Ordinal identify the effect: the transaction it
	// belongs to, a series within it, and its place in the series.
	Txn     string
	Series  string
	Ordinal int64
	// Attempts counts the times the effect was begun: more than one means
	// a run was cut short between the start and the result, and the
	// effect was resolved again.
	Attempts  int
	StartedAt time.Time
	// FinishedAt is zero, and Result empty, until the effect is finished.
	FinishedAt time.Time
	Result     string
}

// Finished reports whether the effect's result is recorded.
func (e *Effect) Finished() bool { return !e.FinishedAt.IsZero() }
