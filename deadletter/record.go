package deadletter

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/weirhq/weir/weirtype"
)

// Record is the JSON shape of one dead letter, as Export and the retention
// archive write it, one a line. The field names are stable: where weir's
// retry spec gives the DLQ payload a name (original_event, idempotency_key,
// attempt_count, last_error, error_type, abandoned_reason, timestamp) the
// record uses it, and every other field is snake_case too. Times are
// RFC 3339 in UTC.
type Record struct {
	// ID is the dead letter's id; JobID the job's. Archives may hold a
	// record twice (see the package doc); ID tells the copies apart from
	// distinct letters.
	ID    int64  `json:"id"`
	JobID int64  `json:"job_id"`
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	// Source says where the job came from (a blob path, a message id).
	Source         string `json:"source"`
	IdempotencyKey string `json:"idempotency_key"`
	// OriginalEvent is the job's payload, as JSON, compacted onto one
	// line. A payload that is not valid JSON (which the store does not
	// accept, so only a damaged row) is kept as a JSON string of its text
	// rather than lost; an empty one is null.
	OriginalEvent json.RawMessage `json:"original_event"`
	// AttemptCount is how many attempts were made.
	AttemptCount int `json:"attempt_count"`
	// LastError and ErrorType are the last attempt's error.
	LastError string `json:"last_error"`
	ErrorType string `json:"error_type"`
	// AbandonedReason is why the job was abandoned, such as
	// "max_attempts_exceeded".
	AbandonedReason weirtype.AbandonReason `json:"abandoned_reason"`
	// ErrorHistory is every attempt's error, oldest first; [] when none.
	ErrorHistory []AttemptError `json:"error_history"`
	// JobCreatedAt is when the job was made; FailedAt when it was
	// abandoned. Timestamp is FailedAt again, under the name the spec's
	// DLQ payload gives it.
	JobCreatedAt time.Time `json:"job_created_at"`
	FailedAt     time.Time `json:"failed_at"`
	Timestamp    time.Time `json:"timestamp"`
}

// AttemptError is one entry of Record.ErrorHistory: the error of one
// failed attempt.
type AttemptError struct {
	// Attempt is the attempt's number, from 1.
	Attempt int `json:"attempt"`
	// At is when it failed, in UTC.
	At time.Time `json:"at"`
	// Message is the error's text; Type its Go type.
	Message string `json:"message"`
	Type    string `json:"type"`
}

// RecordOf returns the record of dl.
func RecordOf(dl *weirtype.DeadLetter) Record {
	history := make([]AttemptError, len(dl.Errors))
	for i, e := range dl.Errors {
		history[i] = AttemptError{Attempt: e.Attempt, At: e.At.UTC(), Message: e.Message, Type: e.Type}
	}
	return Record{
		ID:              dl.ID,
		JobID:           dl.JobID,
		Kind:            dl.Kind,
		Queue:           dl.Queue,
		Source:          dl.Source,
		IdempotencyKey:  dl.IdempotencyKey,
		OriginalEvent:   originalEvent(dl.Payload),
		AttemptCount:    dl.Attempts,
		LastError:       dl.LastError,
		ErrorType:       dl.ErrorType,
		AbandonedReason: dl.Reason,
		ErrorHistory:    history,
		JobCreatedAt:    dl.JobCreatedAt.UTC(),
		FailedAt:        dl.FailedAt.UTC(),
		Timestamp:       dl.FailedAt.UTC(),
	}
}

// originalEvent is payload compacted, so that a record is one line and
// decodes back to the same bytes; a payload that is not JSON becomes a
// JSON string of its bytes, so that encoding the record cannot fail and
// retention cannot stall on a damaged row.
func originalEvent(payload json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(payload)) == 0 {
		return json.RawMessage("null")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, payload); err == nil {
		return b.Bytes()
	}
	s, _ := json.Marshal(string(payload)) // a string always encodes
	return s
}
