package admin

import (
	"encoding/json"
	"time"

	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// The JSON shapes of the answers: snake_case, times in RFC 3339 UTC, a
// time that is not set left out.

// Job is a job as the API shows it.
type Job struct {
	ID             int64                   `json:"id"`
	Kind           string                  `json:"kind"`
	Queue          string                  `json:"queue"`
	State          weirtype.State          `json:"state"`
	Payload        json.RawMessage         `json:"payload"`
	Attempt        int                     `json:"attempt"`
	MaxAttempts    int                     `json:"max_attempts"`
	IdempotencyKey string                  `json:"idempotency_key,omitempty"`
	Source         string                  `json:"source,omitempty"`
	Priority       int                     `json:"priority"`
	ScheduledAt    *time.Time              `json:"scheduled_at,omitempty"`
	CreatedAt      *time.Time              `json:"created_at,omitempty"`
	UpdatedAt      *time.Time              `json:"updated_at,omitempty"`
	AttemptedAt    *time.Time              `json:"attempted_at,omitempty"`
	FinalizedAt    *time.Time              `json:"finalized_at,omitempty"`
	LeaseOwner     string                  `json:"lease_owner,omitempty"`
	LeaseExpiresAt *time.Time              `json:"lease_expires_at,omitempty"`
	DeadlineAt     *time.Time              `json:"deadline_at,omitempty"`
	Errors         []weirtype.AttemptError `json:"errors"`
	// Progress is the latest progress an attempt recorded (percent,
	// message, attempt, at); Output is what the latest success returned.
	// Both are left out when there is none.
	Progress *weirtype.Progress `json:"progress,omitempty"`
	Output   json.RawMessage    `json:"output,omitempty"`
}

// at is t in UTC, nil when zero.
func at(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func jobOf(j *weirtype.Job) Job {
	errs := j.Errors
	if errs == nil {
		errs = []weirtype.AttemptError{}
	}
	payload := j.Payload
	if !json.Valid(payload) {
		b, _ := json.Marshal(string(payload))
		payload = b
	}
	return Job{ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: j.State, Payload: payload, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		IdempotencyKey: j.IdempotencyKey, Source: j.Source, Priority: j.Priority,
		ScheduledAt: at(j.ScheduledAt), CreatedAt: at(j.CreatedAt), UpdatedAt: at(j.UpdatedAt), AttemptedAt: at(j.AttemptedAt),
		FinalizedAt: at(j.FinalizedAt), LeaseOwner: j.LeaseOwner, LeaseExpiresAt: at(j.LeaseExpiresAt), DeadlineAt: at(j.DeadlineAt),
		Errors: errs, Progress: j.Progress, Output: j.Output}
}

func jobsOf(js []*weirtype.Job) []Job {
	out := make([]Job, len(js))
	for i, j := range js {
		out[i] = jobOf(j)
	}
	return out
}

// Breaker is a breaker's state and counts.
type Breaker struct {
	Name                string     `json:"name"`
	State               string     `json:"state"`
	Successes           uint64     `json:"successes"`
	Failures            uint64     `json:"failures"`
	ConsecutiveFailures uint64     `json:"consecutive_failures"`
	Rejected            uint64     `json:"rejected"`
	OpenedAt            *time.Time `json:"opened_at,omitempty"`
	NextProbeAt         *time.Time `json:"next_probe_at,omitempty"`
}

func breakerOf(s breaker.Snapshot) Breaker {
	return Breaker{Name: s.Name, State: s.State.String(), Successes: s.Counts.Successes, Failures: s.Counts.Failures,
		ConsecutiveFailures: s.Counts.ConsecutiveFailures, Rejected: s.Counts.Rejected,
		OpenedAt: at(s.OpenedAt), NextProbeAt: at(s.NextProbeAt)}
}

// Workflow is a workflow as the API shows it. Data is the workflow's
// data as JSON when it is JSON, and in DataBase64 otherwise.
type Workflow struct {
	ID         string                  `json:"id"`
	Name       string                  `json:"name"`
	State      string                  `json:"state"`
	Status     weirtype.WorkflowStatus `json:"status"`
	Version    int64                   `json:"version"`
	Error      string                  `json:"error,omitempty"`
	Data       json.RawMessage         `json:"data,omitempty"`
	DataBase64 []byte                  `json:"data_base64,omitempty"`
	CreatedAt  *time.Time              `json:"created_at,omitempty"`
	UpdatedAt  *time.Time              `json:"updated_at,omitempty"`
}

func workflowOf(wf *weirtype.Workflow) Workflow {
	out := Workflow{ID: wf.ID, Name: wf.Name, State: wf.State, Status: wf.Status, Version: wf.Version, Error: wf.Error,
		CreatedAt: at(wf.CreatedAt), UpdatedAt: at(wf.UpdatedAt)}
	if len(wf.Data) > 0 {
		if json.Valid(wf.Data) {
			out.Data = wf.Data
		} else {
			out.DataBase64 = wf.Data
		}
	}
	return out
}

// Transition is one entry of a workflow's history.
type Transition struct {
	Version   int64                   `json:"version"`
	FromState string                  `json:"from_state"`
	State     string                  `json:"state"`
	Status    weirtype.WorkflowStatus `json:"status"`
	Error     string                  `json:"error,omitempty"`
	At        time.Time               `json:"at"`
}

func transitionsOf(ts []*store.WorkflowTransition) []Transition {
	out := make([]Transition, len(ts))
	for i, t := range ts {
		out[i] = Transition{Version: t.Version, FromState: t.FromState, State: t.State, Status: t.Status, Error: t.Error, At: t.At.UTC()}
	}
	return out
}

// JobCount is how many jobs of a queue and kind are in a state, and how
// many of those are stuck.
type JobCount struct {
	Queue string         `json:"queue"`
	Kind  string         `json:"kind"`
	State weirtype.State `json:"state"`
	Count int            `json:"count"`
	Stuck int            `json:"stuck"`
}
