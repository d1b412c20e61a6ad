package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/weirhq/weir/weirtype"
)

// Results keeps what a running attempt reports beside its outcome: its
// progress while it runs, and the output of its success. Each write is
// guarded by the lease, as Complete is: a worker that lost its lease
// writes nothing.
type Results interface {
	// SetProgress records p, at now, as the progress of the job of a
	// lease still held (p.Attempt and p.At are set from the lease and
	// now). ErrLeaseLost, changing nothing, when the lease is not held;
	// ErrInvalid for a p that fails p.Validate.
	SetProgress(ctx context.Context, now time.Time, l Lease, p weirtype.Progress) error

	// CompleteOutputs completes, as CompleteMany does and in one
	// transaction, the job of each completion whose lease is still held,
	// storing its Output with it, and returns the ids of the jobs it did
	// not complete (their leases lost). An output that fails
	// weirtype.CheckOutput is ErrInvalid, and nothing is written.
	CompleteOutputs(ctx context.Context, now time.Time, cs []Completion) (lost []int64, err error)
}

// Completion is a success to record: the attempt's lease and what it
// returned.
type Completion struct {
	Lease Lease
	// Output is the attempt's output as JSON; empty (or JSON null) for
	// none.
	Output json.RawMessage
}

// CheckCompletions returns the error of the first completion of cs whose
// lease or output is not valid.
func CheckCompletions(cs []Completion) error {
	for _, c := range cs {
		if err := FirstError(c.Lease.Validate(), weirtype.CheckOutput(c.Output)); err != nil {
			return err
		}
	}
	return nil
}

// Retention deletes the completed and cancelled jobs past their retention,
// in small batches, and lets one process at a time do it.
type Retention interface {
	// TakeSweepLease takes, or renews, for owner until now+leaseFor the
	// lease named name (a sweep that one process at a time should run),
	// and reports whether owner holds it: false, changing nothing, while
	// another owner's lease lasts.
	TakeSweepLease(ctx context.Context, now time.Time, name, owner string, leaseFor time.Duration) (bool, error)

	// FinalJobKinds returns, sorted, the kinds that have completed or
	// cancelled jobs.
	FinalJobKinds(ctx context.Context) ([]string, error)

	// PurgeJobs deletes, in one short transaction, up to Limit completed
	// or cancelled jobs of Kind whose FinalizedAt is before Before, oldest
	// first, and returns how many it deleted. Dead jobs are never deleted
	// here: they go with their dead letters (PurgeDeadLetters).
	PurgeJobs(ctx context.Context, p PurgeJobsParams) (int, error)
}

// MaxPurgeLimit is the largest PurgeJobsParams.Limit: one statement never
// deletes more, so that it holds its locks briefly.
const MaxPurgeLimit = 10_000

// PurgeJobsParams is what PurgeJobs takes.
type PurgeJobsParams struct {
	// Kind is the kind whose jobs are deleted. Required.
	Kind string
	// Before: only jobs finalized strictly before it.
	Before time.Time
	// Limit is the most jobs deleted, 1 to MaxPurgeLimit.
	Limit int
}

// Validate refuses a purge without a kind or a time, or with a limit out
// of range.
func (p PurgeJobsParams) Validate() error {
	switch {
	case p.Kind == "":
		return invalidf("purge kind is empty")
	case p.Limit > MaxPurgeLimit:
		return invalidf("limit %d is more than %d", p.Limit, MaxPurgeLimit)
	}
	return FirstError(CheckLimit(p.Limit), CheckSet("before", p.Before))
}

// CheckSweepLease refuses a lease without a name or an owner, or with a
// duration that is not positive.
func CheckSweepLease(now time.Time, name, owner string, leaseFor time.Duration) error {
	if name == "" {
		return invalidf("sweep lease name is empty")
	}
	return FirstError(CheckOwner(owner), CheckLeaseFor(leaseFor), CheckNow(now))
}

// Vacuumer is implemented by a store whose job table keeps the dead
// versions of its updated and deleted rows until the database vacuums it
// (PostgreSQL). The retention sweep calls VacuumJobs after each sweep, so
// that the table a claim reads stays small where the server's autovacuum
// does not run.
type Vacuumer interface {
	// VacuumJobs vacuums the job table when the server's autovacuum does
	// not (it is off on the server, or for the table) and the table's
	// dead rows are more than the threshold autovacuum would apply to it;
	// it reports what it found and what it did. While another vacuum
	// holds the table it does nothing and reports no vacuum.
	VacuumJobs(ctx context.Context) (VacuumResult, error)
}

// VacuumResult is what one VacuumJobs found and did.
type VacuumResult struct {
	// Autovacuum is set when the server's autovacuum vacuums the table:
	// VacuumJobs did nothing.
	Autovacuum bool
	// Dead is the table's dead rows before, by the server's statistics,
	// and Threshold the count above which the table is vacuumed.
	Dead, Threshold int64
	// Vacuumed is set when the table was vacuumed, and Took is how long
	// the vacuum took.
	Vacuumed bool
	Took     time.Duration
}
