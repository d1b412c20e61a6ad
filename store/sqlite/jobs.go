package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// ListJobs returns the jobs that match f, newest first; see
// store.Executor. One state reads the index weir_jobs_state in its order
// (the running state, weir_jobs_lease_expiry, sorted); several read it
// once each and sort what they find; no state walks the rowid backwards
// from f.Before.
func (e executor) ListJobs(ctx context.Context, f store.JobFilter) ([]*weirtype.Job, error) {
	f, err := f.Normalize()
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	q, args := listJobsQuery(f)
	jobs, err := queryAll(ctx, e.reader(), q, args, scanJob)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// listJobsQuery is the SELECT of the normalised filter f and its
// arguments. The states are literal parameters, one each (there are at
// most six), so that the planner sees state = ? terms it can search the
// index with; the kinds, any number, are one JSON array. weir_jobs_state
// holds no running job, and SQLite reads a partial index only for a
// statement that has its condition as a term of its own: the states
// other than running are read with state <> 'running' from
// weir_jobs_state, and the running state with state = 'running' from
// weir_jobs_lease_expiry (named: without statistics the planner would
// walk the rowid backwards through the finished jobs instead). States
// with the running one among others are a UNION ALL of both reads.
func listJobsQuery(f store.JobFilter) (string, []any) {
	var rest conds
	if len(f.Kinds) > 0 {
		b, _ := json.Marshal(f.Kinds) // strings: cannot fail
		rest.add("kind IN (SELECT value FROM json_each(?))", string(b))
	}
	if f.Queue != "" {
		rest.add("queue = ?", f.Queue)
	}
	if f.Before > 0 {
		rest.add("id < ?", f.Before)
	}
	const order = " ORDER BY id DESC LIMIT ?"
	if len(f.States) == 0 {
		return "SELECT " + jobColumns + " FROM weir_jobs" + rest.where() + order, append(rest.args, f.Limit)
	}
	var (
		reads []string
		args  []any
	)
	// read adds the SELECT from the table or index from of the jobs that
	// meet state and the other conditions.
	read := func(from string, state conds) {
		state.list = append(state.list, rest.list...)
		state.args = append(state.args, rest.args...)
		reads = append(reads, "SELECT "+jobColumns+" FROM "+from+state.where()+order)
		args = append(append(args, state.args...), f.Limit)
	}
	var others []any
	for _, st := range f.States {
		if st != weirtype.StateRunning {
			others = append(others, string(st))
		}
	}
	if len(others) > 0 {
		var c conds
		c.add("state IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(others)), ", ")+")", others...)
		c.add("state <> 'running'")
		read("weir_jobs", c)
	}
	if slices.Contains(f.States, weirtype.StateRunning) {
		var c conds
		c.add("state = 'running'")
		read("weir_jobs INDEXED BY weir_jobs_lease_expiry", c)
	}
	if len(reads) == 1 {
		return reads[0], args
	}
	return "SELECT * FROM (" + reads[0] + ") UNION ALL SELECT * FROM (" + reads[1] + ")" + order, append(args, f.Limit)
}

// retryFinalJob makes the final job ?3 (in state ?4) available at ?1, keeping
// its attempt count: MaxAttempts is raised to one more than the attempts
// made when none is left, the deadline and lease are cleared, and the
// entry ?2 (JSON) is appended to its errors.
const retryFinalJob = `UPDATE weir_jobs SET
	state = 'available', scheduled_at = ?1, updated_at = ?1, finalized_at = NULL,
	deadline_at = NULL, lease_owner = '', lease_expires_at = NULL,
	max_attempts = max(max_attempts, attempt + 1),
	errors = json_insert(errors, '$[#]', json(?2))
	WHERE id = ?3 AND state = ?4
	RETURNING ` + jobColumns

// RetryJob makes the job run again at now, in one write transaction; see
// store.Executor for what each state does. A dead job's dead letters are
// deleted in the same transaction.
func (e executor) RetryJob(ctx context.Context, now time.Time, id int64) (*weirtype.Job, error) {
	if err := checkNow(now); err != nil {
		return nil, fmt.Errorf("retry job %d: %w", id, err)
	}
	var job *weirtype.Job
	err := e.write(ctx, func(tx *sql.Tx) error {
		// The write transaction holds SQLite's write lock: the state read
		// here is the state the update finds.
		cur, err := scanJob(tx.QueryRowContext(ctx, "SELECT "+jobColumns+" FROM weir_jobs WHERE id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		switch cur.State {
		case weirtype.StateAvailable:
			job = cur
			return nil
		case weirtype.StateRunning:
			return fmt.Errorf("it is running (held by %s): cancel it first: %w", cur.LeaseOwner, store.ErrConflict)
		case weirtype.StateScheduled:
			job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE weir_jobs SET state = 'available', scheduled_at = ?1, updated_at = ?1
				WHERE id = ?2 AND state = 'scheduled' RETURNING `+jobColumns, encodeTime(now), id))
			return err
		}
		entry, err := json.Marshal(retriedEntry(cur, now))
		if err != nil {
			return err
		}
		if job, err = scanJob(tx.QueryRowContext(ctx, retryFinalJob, encodeTime(now), string(entry), id, string(cur.State))); err != nil {
			return err
		}
		if cur.State == weirtype.StateDead {
			_, err = tx.ExecContext(ctx, "DELETE FROM weir_dead_letters WHERE job_id = ?", id)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry job %d: %w", id, err)
	}
	return job, nil
}

// retriedEntry is the error RetryJob appends to the history of a final
// job at now.
func retriedEntry(j *weirtype.Job, now time.Time) weirtype.AttemptError {
	return weirtype.AttemptError{
		Attempt: j.Attempt,
		At:      storedTime(now),
		Message: fmt.Sprintf("retried by an operator from %s after %d attempts; the next is attempt %d", j.State, j.Attempt, j.Attempt+1),
		Type:    weirtype.ErrorTypeRetried,
	}
}
