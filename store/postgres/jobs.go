package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// ListJobs returns the jobs that match f, newest first, in one statement;
// see store.Executor. One state reads weir_jobs_state backwards from
// f.Before (the running state, weir_jobs_lease); no state reads the
// primary key backwards.
func (e executor) ListJobs(ctx context.Context, f store.JobFilter) ([]*weirtype.Job, error) {
	const op = "list jobs"
	f, err := f.Normalize()
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	sql, args := e.s.listJobsQuery(f)
	var jobs []*weirtype.Job
	err = e.run(ctx, func(q querier) (err error) {
		jobs, err = queryAll(ctx, q, sql, args, func(row pgx.Row) (*weirtype.Job, error) { return scanJob(row) })
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return jobs, nil
}

// The literal terms of a listing by state: weir_jobs_state holds the jobs
// of every state but the running one, and weir_jobs_lease those of the
// running one alone. A partial index serves a statement only when the
// planner can prove its condition from the statement's own, which it
// cannot from a parameter in a generic plan; these terms say it.
const (
	notRunning  = "state <> 'running'"
	runningOnly = "state = 'running'"
)

// listJobsQuery is the SELECT of the normalised filter f and its
// arguments. Only the fields set become conditions, so that each filter's
// statement can use the index on them. A single state is an equality, so
// that the planner reads weir_jobs_state in id order; the running jobs
// are read from weir_jobs_lease and sorted, and states with the running
// one among others are a UNION ALL of both reads, which share the
// parameters.
func (s *Store) listJobsQuery(f store.JobFilter) (string, []any) {
	var (
		rest []string
		args []any
	)
	// param adds arg and returns its placeholder.
	param := func(arg any) string {
		args = append(args, arg)
		return "$" + strconv.Itoa(len(args))
	}
	var others []string
	for _, st := range f.States {
		if st != weirtype.StateRunning {
			others = append(others, string(st))
		}
	}
	var arms []string // the state conditions, one per read
	switch len(others) {
	case 0:
	case 1:
		arms = append(arms, "state = "+param(others[0])+" AND "+notRunning)
	default:
		arms = append(arms, "state = ANY("+param(others)+"::text[]) AND "+notRunning)
	}
	if slices.Contains(f.States, weirtype.StateRunning) {
		arms = append(arms, runningOnly)
	}
	switch len(f.Kinds) {
	case 0:
	case 1:
		rest = append(rest, "kind = "+param(f.Kinds[0]))
	default:
		rest = append(rest, "kind = ANY("+param(f.Kinds)+"::text[])")
	}
	if f.Queue != "" {
		rest = append(rest, "queue = "+param(f.Queue))
	}
	if f.Before > 0 {
		rest = append(rest, "id < "+param(f.Before))
	}
	order := " ORDER BY id DESC LIMIT " + param(f.Limit)
	read := func(conds []string) string {
		sql := `SELECT ` + jobColumns + ` FROM ` + s.sql.schema + `.weir_jobs`
		if len(conds) > 0 {
			sql += " WHERE " + strings.Join(conds, " AND ")
		}
		return sql + order
	}
	switch len(arms) {
	case 0:
		return read(rest), args
	case 1:
		return read(append([]string{arms[0]}, rest...)), args
	}
	return "(" + read(append([]string{arms[0]}, rest...)) + ") UNION ALL (" + read(append([]string{arms[1]}, rest...)) + ")" + order, args
}

// RetryJob makes the job run again at now; see store.Executor for what
// each state does. It locks the job, then updates it (and deletes a dead
// job's dead letters) in one statement, in one transaction (the caller's,
// for an Executor from Tx). A job made available announces its queue (see
// Store.Listen).
func (e executor) RetryJob(ctx context.Context, now time.Time, id int64) (*weirtype.Job, error) {
	op := fmt.Sprintf("retry job %d", id)
	if err := refuse(op, store.CheckNow(now)); err != nil {
		return nil, err
	}
	now = micro(now)
	schema := e.s.sql.schema
	var job *weirtype.Job
	err := e.runTx(ctx, func(q querier) error {
		cur, err := scanJob(q.QueryRow(ctx, `SELECT `+jobColumns+` FROM `+schema+`.weir_jobs WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		var set string
		args := []any{id, now}
		switch cur.State {
		case weirtype.StateAvailable:
			job = cur
			return nil
		case weirtype.StateRunning:
			return fmt.Errorf("it is running (held by %s): cancel it first: %w", cur.LeaseOwner, store.ErrConflict)
		case weirtype.StateScheduled:
			set = `state = 'available', scheduled_at = $2::timestamptz, updated_at = $2::timestamptz`
		default:
			entry, err := json.Marshal(retriedEntry(cur, now))
			if err != nil {
				return err
			}
			// The attempt count is kept; MaxAttempts is raised so that
			// at least one attempt is left.
			set = `state = 'available', scheduled_at = $2::timestamptz, updated_at = $2::timestamptz,
		finalized_at = NULL, deadline_at = NULL, ` + dropLease + `,
		max_attempts = greatest(max_attempts, attempt + 1),
		errors = errors || jsonb_build_array($3::jsonb)`
			args = append(args, string(entry))
		}
		sql := `WITH job AS (
	UPDATE ` + schema + `.weir_jobs SET ` + set + `
	WHERE id = $1
	RETURNING ` + jobColumns + `
), letters AS (
	DELETE FROM ` + schema + `.weir_dead_letters WHERE job_id IN (SELECT id FROM job)
), ` + wokenCTE(e.s.channel, "job") + `
SELECT ` + jobColumns + ` FROM job WHERE ` + readWoken
		job, err = scanJob(q.QueryRow(ctx, sql, args...))
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return job, nil
}

// retriedEntry is the error RetryJob appends to the history of a final
// job at now.
func retriedEntry(j *weirtype.Job, now time.Time) weirtype.AttemptError {
	return weirtype.AttemptError{
		Attempt: j.Attempt,
		At:      now.UTC(),
		Message: fmt.Sprintf("retried by an operator from %s after %d attempts; the next is attempt %d", j.State, j.Attempt, j.Attempt+1),
		Type:    weirtype.ErrorTypeRetried,
	}
}
