package weirtype

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// State is where a job is in its life.
type State string

// The states of a job. A job is created available (or scheduled, when it
// may not run yet), becomes running while a worker holds its lease, and ends
// completed, cancelled or dead. A job whose attempt failed and that may be
// retried is scheduled again.
const (
	StateAvailable State = "available" // may run now
	StateScheduled State = "scheduled" // may run at ScheduledAt (a retry waiting out its backoff, or a job for later)
	StateRunning   State = "running"   // a worker holds its lease
	StateCompleted State = "completed" // ran to success
	StateCancelled State = "cancelled" // cancelled before it completed
	StateDead      State = "dead"      // abandoned; its dead letter says why
)

// States lists every state, in the order above.
func States() []State {
	return []State{StateAvailable, StateScheduled, StateRunning, StateCompleted, StateCancelled, StateDead}
}

// Final reports whether s is a state a job does not leave on its own.
func (s State) Final() bool {
	return s == StateCompleted || s == StateCancelled || s == StateDead
}

// Valid reports whether s is one of the states.
func (s State) Valid() bool {
	for _, v := range States() {
		if s == v {
			return true
		}
	}
	return false
}

// AttemptError is the error of one failed attempt, kept on the job.
type AttemptError struct {
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int `json:"attempt"`
	// At is when it failed.
	At time.Time `json:"at"`
	// Message is the error's text.
	Message string `json:"message"`
	// Type is the error's Go type, such as "*fs.PathError".
	Type string `json:"type"`
}

// Job is a job as the store keeps it.
type Job struct {
	ID    int64
	Kind  string
	Queue string
	// Payload is the job's arguments, as JSON.
	Payload json.RawMessage
	State   State
	// Attempt is the number of attempts started so far.
	Attempt     int
	MaxAttempts int
	// IdempotencyKey makes the job unique: a second insert with the same
	// key finds this job instead of making another. Empty for none.
	IdempotencyKey string
	// Source says where the job came from, for operators (a blob path, a
	// message id). Empty for none.
	Source   string
	Priority int
	// ScheduledAt is when the job may run (next).
	ScheduledAt time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// AttemptedAt is when the latest attempt started; zero before the first.
	AttemptedAt time.Time
	// FinalizedAt is when the job reached a final state; zero before.
	FinalizedAt time.Time
	// LeaseOwner and LeaseExpiresAt name the worker that holds the running
	// job and until when; empty and zero when no one does.
	LeaseOwner     string
	LeaseExpiresAt time.Time
	// DeadlineAt is the job's SLA: past it an unfinished job fails with
	// reason deadline_exceeded. Zero for none.
	DeadlineAt time.Time
	// Errors holds the error of every failed attempt, oldest first.
	Errors []AttemptError
	// Progress is the latest progress an attempt recorded (see its
	// Attempt); nil when none did.
	Progress *Progress
	// Output is what the job's latest success returned, as JSON of at
	// most MaxOutput bytes; empty for none.
	Output json.RawMessage
}

// InsertOutcome is what an insert did.
type InsertOutcome string

// The outcomes of an insert. Only Inserted and Reclaimed make the job run
// (again); the duplicates leave the existing job as it is.
const (
	// Inserted: a new job was made.
	Inserted InsertOutcome = "inserted"
	// DuplicatePending: a job with the key is waiting to run.
	DuplicatePending InsertOutcome = "duplicate_pending"
	// DuplicateRunning: a job with the key is running and not stuck.
	DuplicateRunning InsertOutcome = "duplicate_running"
	// DuplicateCompleted: a job with the key completed.
	DuplicateCompleted InsertOutcome = "duplicate_completed"
	// DuplicateFinal: a job with the key was cancelled or abandoned to the
	// dead-letter store; requeue it from there to run it again.
	DuplicateFinal InsertOutcome = "duplicate_final"
	// Reclaimed: a job with the key had been running for longer than the
	// stuck threshold and no worker held it (its lease had expired and
	// was not rescued yet); it was made available to run again, its lease
	// dropped, and an AttemptError of type ErrorTypeStuck recorded for the
	// attempt that never finished. A running job whose lease is alive is
	// never reclaimed: the insert is DuplicateRunning.
	Reclaimed InsertOutcome = "reclaimed"
)

// ErrorTypeStuck is the AttemptError.Type of an attempt that was still
// running past the stuck threshold when its job was reclaimed.
const ErrorTypeStuck = "stuck"

// Runs reports whether the outcome makes the job run.
func (o InsertOutcome) Runs() bool { return o == Inserted || o == Reclaimed }

// IdempotencyKey returns the hex SHA-256 of parts, each prefixed with its
// length so that ("ab", "c") and ("a", "bc") differ. For a blob event,
// IdempotencyKey(container, blobPath, etag) gives the same key however often
// the event fires, and a new key when the blob's content changes.
func IdempotencyKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AbandonReason is why a job was abandoned to the dead-letter store. The
// strings are stable: they are metric labels and stored with dead letters.
type AbandonReason string

// The reasons a job is abandoned.
const (
	AbandonMaxAttempts AbandonReason = "max_attempts_exceeded"
	AbandonTTL         AbandonReason = "ttl_exceeded"
	AbandonPermanent   AbandonReason = "non_retryable"
	AbandonDeadline    AbandonReason = "deadline_exceeded"
	// AbandonRetryAfterLimit: the attempt's error asked, with a
	// retry-after hint, for a longer wait than the kind allows
	// (KindConfig.MaxRetryAfter): the job is abandoned at once rather
	// than retried before the server allows. The retry policy of package
	// resilience/retry gives up with the same string.
	AbandonRetryAfterLimit AbandonReason = "retry_after_exceeds_limit"
)

// AbandonReasons lists every reason, in the order above. Filters of dead
// letters (the CLI's, the admin API's) validate against it.
func AbandonReasons() []AbandonReason {
	return []AbandonReason{AbandonMaxAttempts, AbandonTTL, AbandonPermanent, AbandonDeadline, AbandonRetryAfterLimit}
}

// Valid reports whether r is one of the reasons.
func (r AbandonReason) Valid() bool {
	for _, v := range AbandonReasons() {
		if r == v {
			return true
		}
	}
	return false
}

// Error types recorded by the store itself, beside ErrorTypeStuck.
const (
	// ErrorTypeLeaseExpired: the worker's lease ran out before it
	// finished (it crashed, or lost the database).
	ErrorTypeLeaseExpired = "lease_expired"
	// ErrorTypeReleased: the worker gave the job back (a shutdown that
	// ran out of time, or a restarted process taking back its jobs).
	ErrorTypeReleased = "released"
	// ErrorTypeRequeued marks where an operator requeued the job from the
	// dead-letter store (with Attempt 0: no attempt failed); the attempts
	// after it start again from 1, and its At starts the job's TTL anew.
	ErrorTypeRequeued = "requeued"
	// ErrorTypeRetried marks where an operator made a completed, cancelled
	// or dead job run again (store.Executor.RetryJob). Its Attempt is the
	// job's attempt count then, which goes on counting: the next attempt
	// is Attempt+1.
	ErrorTypeRetried = "retried"
)

// DeadLetter is an abandoned job with everything an operator needs to
// decide what to do with it.
type DeadLetter struct {
	// ID is the dead letter's own id; JobID the job's, whose row stays
	// (state dead) so that its idempotency key keeps absorbing duplicates.
	ID    int64
	JobID int64
	Kind  string
	Queue string
	// Source says where the job came from.
	Source         string
	IdempotencyKey string
	// Payload is the job's original arguments.
	Payload json.RawMessage
	// Attempts is how many attempts were made.
	Attempts int
	// LastError and ErrorType are the last attempt's error.
	LastError string
	ErrorType string
	Reason    AbandonReason
	// Errors is every attempt's error, oldest first.
	Errors []AttemptError
	// JobCreatedAt is when the job was made; FailedAt when it was
	// abandoned.
	JobCreatedAt time.Time
	FailedAt     time.Time
}

// ErrorTypeDeadlineExceeded is the type of the error recorded when a job is
// abandoned past its deadline.
const ErrorTypeDeadlineExceeded = "deadline_exceeded"

// LateResult is the success of an attempt that finished after its job's
// deadline had abandoned it. It changes nothing until an operator accepts
// it, which completes the job.
type LateResult struct {
	ID    int64
	JobID int64
	Kind  string
	Queue string
	// Attempt and Owner are the attempt that finished and the worker
	// that ran it.
	Attempt int
	Owner   string
	// DeadlineAt is the job's deadline; ReceivedAt when the success came.
	DeadlineAt time.Time
	ReceivedAt time.Time
	// AcceptedAt is when an operator accepted the result; zero until then.
	AcceptedAt time.Time
}

// OutboxMessage is a message in the outbox: added in a caller's
// transaction, then published by a relay.
type OutboxMessage struct {
	// ID is the message's stable id: carried to the broker as its message
	// id, so that a republish after a crash is recognised as a duplicate.
	ID      int64
	Topic   string
	Key     string
	Payload []byte
	Headers map[string]string
	// CreatedAt is when it was added; PublishedAt when the broker
	// confirmed it (zero until then).
	CreatedAt   time.Time
	PublishedAt time.Time
	// Attempts counts the failed publishes; LastError is the last one's.
	Attempts  int
	LastError string
	// NextAttemptAt is when it may be published (again).
	NextAttemptAt time.Time
	// LeaseOwner and LeaseExpiresAt name the relay that holds it, if any.
	LeaseOwner     string
	LeaseExpiresAt time.Time
}

// OutboxIDs returns the ids of ms, in order.
func OutboxIDs(ms []*OutboxMessage) []int64 {
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}
