package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// ErrInvalid: a parameter is out of range; the error names it.
	ErrInvalid = errors.New("store: invalid parameter")
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

// Executor runs the engine's queries, on a pool or inside a caller's
// transaction.
type Executor interface {
	// Insert inserts jobs at time now, all or none. For a job with an
	// idempotency key the check and the insert are one atomic step: of
	// any number of concurrent inserts of one key, exactly one makes the
	// job. Results are in the order of jobs.
	Insert(ctx context.Context, now time.Time, jobs []InsertParams) ([]InsertResult, error)
	// GetJob returns the job with the id, or an error wrapping
	// ErrNotFound.
	GetJob(ctx context.Context, id int64) (*weirtype.Job, error)
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
	// an insert of its key reclaims it. Default 10 minutes.
	StuckAfter time.Duration
}

// InsertResult is what one insert did, and the job it found or made.
type InsertResult struct {
	Job     *weirtype.Job
	Outcome weirtype.InsertOutcome
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

// InitialState is the state a new job starts in at time now: scheduled when
// it may not run yet, available otherwise.
func (p InsertParams) InitialState(now time.Time) weirtype.State {
	if p.ScheduledAt.After(now) {
		return weirtype.StateScheduled
	}
	return weirtype.StateAvailable
}
