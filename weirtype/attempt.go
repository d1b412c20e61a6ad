package weirtype

// AttemptOutcome is how one attempt of a job ended, as the engine reports
// it to its metrics. The strings are stable: they are metric label values.
type AttemptOutcome string

// The outcomes of an attempt.
const (
	// AttemptCompleted: the handler succeeded and the job completed.
	AttemptCompleted AttemptOutcome = "completed"
	// AttemptFailed: the handler failed; the job is retried or abandoned.
	AttemptFailed AttemptOutcome = "failed"
	// AttemptSnoozed: the handler asked to run the job again later.
	AttemptSnoozed AttemptOutcome = "snoozed"
	// AttemptLate: the handler succeeded after the job's deadline had
	// abandoned it; a late result was stored.
	AttemptLate AttemptOutcome = "late"
	// AttemptLeaseLost: the worker lost the job's lease before it
	// finished, so its result was not recorded.
	AttemptLeaseLost AttemptOutcome = "lease_lost"
)
