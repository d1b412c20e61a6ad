package store

import (
	"time"

	"github.com/weirhq/weir/weirtype"
)

// The checks of the Executor's parameters. Each driver calls them before
// it reads or writes, so that both refuse the same calls with the same
// words: an error wrapping ErrInvalid that names the bad parameter, which
// the driver wraps with the name of its call. What only one database
// cannot store (a time out of SQLite's range, a NUL byte in PostgreSQL's
// text) the driver checks itself, with weirtype.Invalidf.

var invalidf = weirtype.Invalidf

// FirstError returns the first of errs that is not nil: a call with
// several bad parameters names the first.
func FirstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckSet refuses a zero time for the parameter name (a call's now, a
// snooze's until): the caller's clock was not set.
func CheckSet(name string, t time.Time) error {
	if t.IsZero() {
		return invalidf("%s is the zero time", name)
	}
	return nil
}

// CheckNow is CheckSet for a call's now.
func CheckNow(now time.Time) error { return CheckSet("now", now) }

// CheckLimit refuses a limit below 1, for the calls that take a batch.
func CheckLimit(limit int) error {
	if limit < 1 {
		return invalidf("limit %d is less than 1", limit)
	}
	return nil
}

// CheckPageLimit refuses a negative limit, for the listings where 0 means
// no limit.
func CheckPageLimit(limit int) error {
	if limit < 0 {
		return invalidf("limit %d is negative", limit)
	}
	return nil
}

// CheckOwner refuses an empty owner: a worker or a relay names itself.
func CheckOwner(owner string) error {
	if owner == "" {
		return invalidf("owner is empty")
	}
	return nil
}

// CheckLeaseFor refuses a lease duration that is not positive.
func CheckLeaseFor(d time.Duration) error {
	if d <= 0 {
		return invalidf("lease-for %v is not positive", d)
	}
	return nil
}

// Validate refuses a lease that no claim hands out: one without an owner,
// or at an attempt below 1. A lease of a missing job is not invalid: it is
// lost.
func (l Lease) Validate() error {
	switch {
	case l.Owner == "":
		return invalidf("lease of job %d: owner is empty", l.ID)
	case l.Attempt < 1:
		return invalidf("lease of job %d: attempt %d is less than 1", l.ID, l.Attempt)
	}
	return nil
}

// CheckLeases returns the error of the first lease of leases that is not
// valid.
func CheckLeases(leases []Lease) error {
	for _, l := range leases {
		if err := l.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Validate refuses a claim of no job, without an owner or a lease, or at
// the zero time.
func (p ClaimParams) Validate() error {
	if err := FirstError(CheckLimit(p.Limit), CheckOwner(p.Owner), CheckLeaseFor(p.LeaseFor), CheckNow(p.Now)); err != nil {
		return err
	}
	if !p.From.IsZero() && (p.From.ID < 1 || p.From.ScheduledAt.IsZero()) {
		return invalidf("from: a place needs a job id and a scheduled time (ClaimFromJob), got id %d at %v", p.From.ID, p.From.ScheduledAt)
	}
	return nil
}

// Validate refuses a failure of a lease that is not valid, at the zero
// time, or abandoned for a reason the dead letters cannot hold.
func (p FailParams) Validate() error {
	if err := FirstError(p.Lease.Validate(), CheckNow(p.Now)); err != nil {
		return err
	}
	if p.Abandon != "" && !p.Abandon.Valid() {
		return invalidf("abandon reason %q is unknown (want one of %v)", p.Abandon, weirtype.AbandonReasons())
	}
	return nil
}

// Validate refuses a message without a topic.
func (m OutboxMessage) Validate() error {
	if m.Topic == "" {
		return invalidf("topic is empty")
	}
	return nil
}

// Validate refuses a claim of no message, without an owner or a lease, or
// at the zero time.
func (p OutboxClaimParams) Validate() error {
	return FirstError(CheckLimit(p.Limit), CheckOwner(p.Owner), CheckLeaseFor(p.LeaseFor), CheckNow(p.Now))
}

// CheckInboxRecord refuses an inbox record without a topic or a message
// id.
func CheckInboxRecord(topic, id string) error {
	switch {
	case topic == "":
		return invalidf("topic is empty")
	case id == "":
		return invalidf("message id of topic %q is empty", topic)
	}
	return nil
}

// Validate refuses a workflow without an id, a name or a state, or with
// more data than weirtype.MaxWorkflowData.
func (p WorkflowParams) Validate() error {
	switch {
	case p.ID == "":
		return invalidf("workflow id is empty")
	case p.Name == "":
		return invalidf("workflow %q: name is empty", p.ID)
	case p.State == "":
		return invalidf("workflow %q: state is empty", p.ID)
	}
	return checkWorkflowData(p.ID, p.Data)
}

// Validate refuses a transition of no workflow, from a version below 1
// (which no workflow has), to no state or an unknown status (the zero
// status is running), or with more data than weirtype.MaxWorkflowData.
func (p AdvanceParams) Validate() error {
	switch {
	case p.ID == "":
		return invalidf("workflow id is empty")
	case p.Version < 1:
		return invalidf("workflow %q: version %d is less than 1", p.ID, p.Version)
	case p.State == "":
		return invalidf("workflow %q: state is empty", p.ID)
	case p.Status != "" && !p.Status.Valid():
		return invalidf("workflow %q: status %q is unknown", p.ID, p.Status)
	}
	return checkWorkflowData(p.ID, p.Data)
}

func checkWorkflowData(id string, data []byte) error {
	if len(data) > weirtype.MaxWorkflowData {
		return invalidf("workflow %q: data of %d bytes is over the limit of %d", id, len(data), weirtype.MaxWorkflowData)
	}
	return nil
}

// Validate refuses a negative limit or an unknown status.
func (f WorkflowFilter) Validate() error {
	if f.Status != "" && !f.Status.Valid() {
		return invalidf("filter status %q is unknown", f.Status)
	}
	return CheckPageLimit(f.Limit)
}

// CheckHistoryPage refuses a page of a workflow's history with a negative
// limit or version.
func CheckHistoryPage(afterVersion int64, limit int) error {
	if afterVersion < 0 {
		return invalidf("after version %d is negative", afterVersion)
	}
	return CheckPageLimit(limit)
}

// CheckTxn refuses an empty ledger transaction.
func CheckTxn(txn string) error {
	if txn == "" {
		return invalidf("txn is empty")
	}
	return nil
}

// Validate refuses an effect without a txn or with a negative ordinal.
func (k EffectKey) Validate() error {
	if err := CheckTxn(k.Txn); err != nil {
		return err
	}
	if k.Ordinal < 0 {
		return invalidf("effect %q/%q/%d: ordinal is negative", k.Txn, k.Series, k.Ordinal)
	}
	return nil
}

// CheckLate refuses as not late the success of the held attempt of job id
// at now, when the job has no deadline (deadline is zero) or its deadline
// has not passed: such an attempt is completed, not stored as a late
// result.
func CheckLate(id int64, deadline, now time.Time) error {
	switch {
	case deadline.IsZero():
		return invalidf("job %d has no deadline, so it cannot be late", id)
	case !deadline.Before(now):
		return invalidf("job %d's deadline %s has not passed at %s: the attempt is not late",
			id, deadline.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
