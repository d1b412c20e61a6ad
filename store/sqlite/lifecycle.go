package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// The job lifecycle: claim, heartbeat, complete, fail, snooze, cancel,
// rescue and release.
//
// Every write runs in a write transaction on the single write connection
// (or in the caller's transaction on it), so writes never interleave: a
// statement that selects jobs and updates them is atomic without row locks.
// The writes a worker makes to a job it holds (Complete, Fail, Snooze, and
// Heartbeat) are guarded in their single UPDATE by state = 'running' AND
// lease_owner = the lease's owner AND attempt = the lease's attempt: a job
// rescued, released or cancelled meanwhile is not touched, even when the
// same owner has claimed it again for a later attempt, and the worker gets
// store.ErrLeaseLost.

// claimJobs takes up to ?5 jobs of queue ?4 at time ?1 for owner ?2 until
// ?3. Each arm of the UNION walks the partial index of its state
// (weir_jobs_available, weir_jobs_scheduled: queue, priority DESC,
// scheduled_at, id, kind) in order and stops at the limit, so a claim
// reads at most twice the limit of index entries (plus scheduled jobs not
// yet due that outrank due ones) however long the queue is; one query
// with "state = 'available' OR state = 'scheduled'" would sort every
// waiting job of the queue instead. The limit is limit5, not a bare ?5:
// see there.
var claimJobs = claimWhere("")

// claimUnlimited is claimJobs for the jobs of the kinds that count against
// no limit, and claimLimited for those of the kinds in the JSON array ?6
// (see limit.go).
var (
	claimUnlimited = claimWhere(` AND kind NOT IN (SELECT kind FROM weir_limit_kinds)`)
	claimLimited   = claimWhere(` AND kind IN (SELECT value FROM json_each(?6))`)
)

// claimWhere is the claim of claimJobs, of the jobs that meet the
// condition and too.
func claimWhere(and string) string {
	return `UPDATE weir_jobs SET
	state = 'running', attempt = attempt + 1, attempted_at = ?1, updated_at = ?1, lease_owner = ?2, lease_expires_at = ?3
	WHERE id IN (
		SELECT id FROM (
			SELECT id, priority, scheduled_at FROM (
				SELECT id, priority, scheduled_at FROM weir_jobs
				WHERE state = 'available' AND queue = ?4 AND ` + notPaused + and + `
				ORDER BY priority DESC, scheduled_at, id LIMIT ` + limit5 + `)
			UNION ALL
			SELECT id, priority, scheduled_at FROM (
				SELECT id, priority, scheduled_at FROM weir_jobs
				WHERE state = 'scheduled' AND queue = ?4 AND scheduled_at <= ?1 AND ` + notPaused + and + `
				ORDER BY priority DESC, scheduled_at, id LIMIT ` + limit5 + `))
		ORDER BY priority DESC, scheduled_at, id LIMIT ` + limit5 + `)
	RETURNING ` + jobColumns
}

// limit3 and limit5 are the LIMIT clauses of the prepared statements whose
// limit is parameter ?3 or ?5. SQLite compiles a LIMIT that is a bare
// parameter bound to an integer into the statement as a constant, and
// marks the statement to be compiled again whenever the parameter is
// bound to another value; a claim's limit (the worker slots free) changes
// from one claim to the next, so a prepared claim would be parsed and
// planned on almost every call. A cast is evaluated when the statement
// runs instead.
const (
	limit3 = `CAST(?3 AS INTEGER)`
	limit5 = `CAST(?5 AS INTEGER)`
)

// Claim takes up to p.Limit jobs of p.Queue in one UPDATE ... RETURNING and
// returns them in claim order: higher priority first, then earlier
// ScheduledAt, then lower id. As store.Executor says, an available job is
// taken whatever its ScheduledAt (a requeue, or a clock that differs
// between processes, can leave it after p.Now); a scheduled one only once
// its ScheduledAt is not after p.Now.
func (e executor) Claim(ctx context.Context, p store.ClaimParams) ([]*weirtype.Job, error) {
	if p.Queue == "" {
		p.Queue = store.DefaultQueue
	}
	if err := checkClaim(p); err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	var jobs []*weirtype.Job
	err := e.write(ctx, func(tx *sql.Tx) (err error) {
		jobs, err = e.claimIn(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs of queue %q: %w", p.Queue, err)
	}
	sortClaimed(jobs)
	return jobs, nil
}

// claimIn claims in tx as Claim does, p checked.
func (e executor) claimIn(ctx context.Context, tx *sql.Tx, p store.ClaimParams) ([]*weirtype.Job, error) {
	limits, err := e.loadLimits(ctx, tx)
	if err != nil {
		return nil, err
	}
	jobs, err := e.claimProbes(ctx, tx, p, limits)
	if err != nil {
		return nil, err
	}
	if len(jobs) == p.Limit {
		return jobs, limits.record(ctx, tx, p.Now)
	}
	claim := claimJobs
	if len(limits.byKind) > 0 {
		limited, err := e.claimUnderLimits(ctx, tx, p, limits, p.Limit-len(jobs))
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, limited...)
		if len(jobs) == p.Limit {
			return jobs, limits.record(ctx, tx, p.Now)
		}
		claim = claimUnlimited
	}
	rows, err := e.s.stmts.query(ctx, tx, claim,
		encodeTime(p.Now), p.Owner, encodeTime(p.Now.Add(p.LeaseFor)), p.Queue, p.Limit-len(jobs))
	if err != nil {
		return nil, err
	}
	rest, err := scanJobs(rows, min(p.Limit-len(jobs), 100))
	if err != nil {
		return nil, err
	}
	return append(jobs, rest...), limits.record(ctx, tx, p.Now)
}

// sortClaimed puts claimed jobs in claim order: RETURNING gives the rows
// in no promised order.
func sortClaimed(jobs []*weirtype.Job) {
	slices.SortFunc(jobs, func(a, b *weirtype.Job) int {
		return cmp.Or(
			cmp.Compare(b.Priority, a.Priority),
			a.ScheduledAt.Compare(b.ScheduledAt),
			cmp.Compare(a.ID, b.ID))
	})
}

// checkClaim is p.Validate, and the lease's end in the range of times
// SQLite keeps.
func checkClaim(p store.ClaimParams) error {
	return store.FirstError(p.Validate(), checkNow(p.Now), checkTime("lease expiry", p.Now.Add(p.LeaseFor)))
}

// scanJobs reads and closes rows of jobColumns.
func scanJobs(rows *sql.Rows, capacity int) ([]*weirtype.Job, error) {
	return scanRows(rows, make([]*weirtype.Job, 0, capacity), scanJob)
}

// scanIDs reads and closes rows of one integer column.
func scanIDs(rows *sql.Rows) ([]int64, error) {
	return scanRows(rows, nil, scanID)
}

// scanID reads a row of one integer column.
func scanID(row scanner) (id int64, err error) {
	err = row.Scan(&id)
	return id, err
}

// idList is ids as a JSON array, for "id IN (SELECT value FROM
// json_each(?))": one parameter however many ids, so no statement meets
// SQLite's limit on parameters, and one statement text to cache.
func idList(ids []int64) string {
	b := make([]byte, 0, 2+len(ids)*8)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// heartbeatJobs extends to ?1 the leases ?2, a JSON array of [id, owner,
// attempt] arrays, still held. The join walks the leases and looks each job
// up by its rowid, so it costs what the worker holds; NOT INDEXED keeps the
// planner, which has no statistics, from walking every running job
// through their partial index instead (the rowid still serves). A job
// appears once in RETURNING however many times its lease was given.
const heartbeatJobs = `UPDATE weir_jobs NOT INDEXED SET lease_expires_at = ?1
	FROM (SELECT value ->> 0 AS lease_id, value ->> 1 AS lease_owner, value ->> 2 AS lease_attempt
		FROM json_each(?2)) AS l
	WHERE weir_jobs.id = l.lease_id AND weir_jobs.state = 'running'
		AND weir_jobs.lease_owner = l.lease_owner AND weir_jobs.attempt = l.lease_attempt
	RETURNING id, lease_owner, attempt`

// Heartbeat extends the leases still held in one UPDATE, and returns the
// job ids of the others (each id once, in the order of leases). A lease of
// an earlier attempt is lost even when its owner holds the job's current
// attempt. It changes only lease_expires_at: UpdatedAt says when the job
// last changed state.
func (e executor) Heartbeat(ctx context.Context, now time.Time, leases []store.Lease, leaseFor time.Duration) ([]int64, error) {
	err := store.FirstError(store.CheckLeases(leases), store.CheckLeaseFor(leaseFor), checkNow(now), checkTime("lease expiry", now.Add(leaseFor)))
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if len(leases) == 0 {
		return nil, nil
	}
	list := leaseList(leases)
	held := make(map[store.Lease]bool, len(leases))
	err = e.write(ctx, func(tx *sql.Tx) error {
		clear(held)
		rows, err := e.s.stmts.query(ctx, tx, heartbeatJobs, encodeTime(now.Add(leaseFor)), list)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l store.Lease
			if err := rows.Scan(&l.ID, &l.Owner, &l.Attempt); err != nil {
				return err
			}
			held[l] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat of %d leases: %w", len(leases), err)
	}
	return store.LostIDs(leases, func(l store.Lease) bool { return held[l] }), nil
}

// leaseList is leases as a JSON array of [id, owner, attempt] arrays, for
// heartbeatJobs: one parameter however many leases.
func leaseList(leases []store.Lease) string {
	b := make([]byte, 0, 2+len(leases)*24)
	b = append(b, '[')
	for i, l := range leases {
		owner, _ := json.Marshal(l.Owner) // a string: cannot fail
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, l.ID, 10)
		b = append(b, ',')
		b = append(b, owner...)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(l.Attempt), 10)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// leaseGuard is the guard of every write a worker makes to a job it holds:
// ?2 is the job's id, ?3 and ?4 the owner and attempt of the lease, and ?1
// is the time of the write. The statements that use it take their other
// parameters from ?5 on.
const leaseGuard = `WHERE id = ?2 AND state = 'running' AND lease_owner = ?3 AND attempt = ?4`

// guarded runs query, an UPDATE of one job guarded by leaseGuard and
// returning jobColumns, in tx, at time now for lease l, with the query's
// own parameters more; see guardedScan.
func (e executor) guarded(ctx context.Context, tx *sql.Tx, query string, now time.Time, l store.Lease, more ...any) (*weirtype.Job, error) {
	return guardedScan(ctx, e, tx, query, now, l, scanJob, more...)
}

// guardedScan runs query, an UPDATE of one job guarded by leaseGuard, in
// tx, at time now for lease l, with the query's own parameters more, and
// reads the row it returns with scan. It returns an error wrapping
// store.ErrLeaseLost when l is no longer held: the job is not running, is
// held by another owner or at another attempt, or does not exist.
func guardedScan[T any](ctx context.Context, e executor, tx *sql.Tx, query string, now time.Time, l store.Lease, scan func(scanner) (T, error), more ...any) (T, error) {
	args := append([]any{encodeTime(now), l.ID, l.Owner, l.Attempt}, more...)
	v, err := scan(e.s.stmts.queryRow(ctx, tx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("%w: %s does not hold job %d at attempt %d", store.ErrLeaseLost, l.Owner, l.ID, l.Attempt)
	}
	return v, err
}

const completeJob = `UPDATE weir_jobs SET
	state = 'completed', finalized_at = ?1, updated_at = ?1, lease_owner = '', lease_expires_at = NULL
	` + leaseGuard + `
	RETURNING ` + jobColumns

// Complete makes the job of lease l completed. When l is no longer held,
// or the job is missing, it returns an error wrapping store.ErrLeaseLost.
func (e executor) Complete(ctx context.Context, now time.Time, l store.Lease) (*weirtype.Job, error) {
	err := store.FirstError(l.Validate(), checkNow(now))
	if err != nil {
		return nil, fmt.Errorf("complete job %d: %w", l.ID, err)
	}
	var job *weirtype.Job
	err = e.write(ctx, func(tx *sql.Tx) (err error) {
		if job, err = e.guarded(ctx, tx, completeJob, now, l); err != nil {
			return err
		}
		return e.endProbes(ctx, tx, []int64{job.ID})
	})
	if err != nil {
		return nil, fmt.Errorf("complete job %d: %w", l.ID, err)
	}
	return job, nil
}

// completeJobs completes at ?1 the jobs of the leases ?2 (as for
// heartbeatJobs) still held, and returns their ids; see heartbeatJobs for
// the plan.
const completeJobs = `UPDATE weir_jobs NOT INDEXED SET
	state = 'completed', finalized_at = ?1, updated_at = ?1, lease_owner = '', lease_expires_at = NULL
	FROM (SELECT value ->> 0 AS lease_id, value ->> 1 AS lease_owner, value ->> 2 AS lease_attempt
		FROM json_each(?2)) AS l
	WHERE weir_jobs.id = l.lease_id AND weir_jobs.state = 'running'
		AND weir_jobs.lease_owner = l.lease_owner AND weir_jobs.attempt = l.lease_attempt
	RETURNING id`

// CompleteMany completes the jobs of the leases still held in one UPDATE,
// and returns the ids of the jobs it did not complete (each id once, in
// the order of leases).
func (e executor) CompleteMany(ctx context.Context, now time.Time, leases []store.Lease) ([]int64, error) {
	err := store.FirstError(store.CheckLeases(leases), checkNow(now))
	if err != nil {
		return nil, fmt.Errorf("complete jobs: %w", err)
	}
	if len(leases) == 0 {
		return nil, nil
	}
	completed := make(map[int64]bool, len(leases))
	err = e.write(ctx, func(tx *sql.Tx) error {
		return e.completeIn(ctx, tx, now, leases, completed)
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(leases), err)
	}
	return notCompleted(leases, completed), nil
}

// completeIn completes in tx, at now, the jobs of the leases still held,
// as CompleteMany does, and sets their ids in completed (cleared first).
func (e executor) completeIn(ctx context.Context, tx *sql.Tx, now time.Time, leases []store.Lease, completed map[int64]bool) error {
	clear(completed)
	rows, err := e.s.stmts.query(ctx, tx, completeJobs, encodeTime(now), leaseList(leases))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		completed[id] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return e.endProbes(ctx, tx, slices.Collect(maps.Keys(completed)))
}

// notCompleted returns the ids of the jobs of leases not in completed, in
// the order of leases, each once.
func notCompleted(leases []store.Lease, completed map[int64]bool) []int64 {
	return store.LostIDs(leases, func(l store.Lease) bool { return completed[l.ID] })
}

// CompleteAndClaim completes the jobs of the leases done still held and
// claims, as CompleteMany then Claim, in one write transaction; see
// store.CompletingClaimer.
func (e executor) CompleteAndClaim(ctx context.Context, done []store.Lease, p store.ClaimParams) ([]int64, []*weirtype.Job, error) {
	if p.Queue == "" {
		p.Queue = store.DefaultQueue
	}
	if err := store.FirstError(store.CheckLeases(done), checkClaim(p)); err != nil {
		return nil, nil, fmt.Errorf("complete and claim: %w", err)
	}
	completed := make(map[int64]bool, len(done))
	var jobs []*weirtype.Job
	err := e.write(ctx, func(tx *sql.Tx) (err error) {
		if len(done) > 0 {
			if err := e.completeIn(ctx, tx, p.Now, done, completed); err != nil {
				return err
			}
		}
		jobs, err = e.claimIn(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("complete %d jobs and claim jobs of queue %q: %w", len(done), p.Queue, err)
	}
	sortClaimed(jobs)
	return notCompleted(done, completed), jobs, nil
}

// retryJob and abandonJob append the attempt's error ?5 (JSON) to the
// job's errors; retryJob makes the job ?6 at ?7.
const (
	retryJob = `UPDATE weir_jobs SET
		state = ?6, scheduled_at = ?7, updated_at = ?1, lease_owner = '', lease_expires_at = NULL,
		errors = json_insert(errors, '$[#]', json(?5))
		` + leaseGuard + `
		RETURNING ` + jobColumns
	abandonJob = `UPDATE weir_jobs SET
		state = 'dead', finalized_at = ?1, updated_at = ?1, lease_owner = '', lease_expires_at = NULL,
		errors = json_insert(errors, '$[#]', json(?5))
		` + leaseGuard + `
		RETURNING ` + jobColumns
)

// Fail records the failed attempt of the job of lease p.Lease: retried at
// p.RetryAt, or, with p.Abandon, dead with its dead letter written in the
// same transaction. A zero p.Error.At is taken as p.Now; the error's time
// is kept, like every time, in UTC to the microsecond. When the lease is
// no longer held, or the job is missing, it returns an error wrapping
// store.ErrLeaseLost.
func (e executor) Fail(ctx context.Context, p store.FailParams) (*weirtype.Job, error) {
	l := p.Lease
	if err := checkFail(p); err != nil {
		return nil, fmt.Errorf("fail job %d: %w", l.ID, err)
	}
	ae := p.Error
	if ae.At.IsZero() {
		ae.At = p.Now
	}
	ae.At = storedTime(ae.At)
	b, err := json.Marshal(ae)
	if err != nil {
		return nil, fmt.Errorf("fail job %d: %w", l.ID, err)
	}
	var job *weirtype.Job
	err = e.write(ctx, func(tx *sql.Tx) (err error) {
		if p.Abandon == "" {
			retryAt := p.RetryAt
			if retryAt.IsZero() { // a zero retry time retries at once
				retryAt = p.Now
			}
			state := weirtype.StateScheduled
			if !retryAt.After(p.Now) {
				state = weirtype.StateAvailable
			}
			job, err = e.guarded(ctx, tx, retryJob, p.Now, l, string(b), string(state), encodeTime(retryAt))
			return err
		}
		job, err = e.guarded(ctx, tx, abandonJob, p.Now, l, string(b))
		if err != nil {
			return err
		}
		return e.insertDeadLetters(ctx, tx, p.Now, p.Abandon, []int64{l.ID})
	})
	if err != nil {
		return nil, fmt.Errorf("fail job %d: %w", l.ID, err)
	}
	return job, nil
}

// checkFail is p.Validate, and its times in the range SQLite keeps.
func checkFail(p store.FailParams) error {
	return store.FirstError(p.Validate(), checkNow(p.Now), checkTime("error at", p.Error.At), checkTime("retry at", p.RetryAt))
}

// insertDeadLetter writes the dead letters of the dead jobs ids, abandoned
// at failedAt for reason, from their rows: last_error and error_type are
// those of the last error in the job's errors, which the caller has just
// appended. NOT INDEXED keeps the planner, which has no statistics, from
// ever walking an index of jobs instead of looking up the few ids (the
// rowid still serves).
const insertDeadLetter = `INSERT INTO weir_dead_letters
	(job_id, kind, queue, source, idempotency_key, payload, attempts, last_error, error_type, reason, errors, job_created_at, failed_at)
	SELECT id, kind, queue, source, idempotency_key, payload, attempt,
		coalesce(errors ->> '$[#-1].message', ''), coalesce(errors ->> '$[#-1].type', ''),
		?1, errors, created_at, ?2
	FROM weir_jobs NOT INDEXED WHERE id IN (SELECT value FROM json_each(?3)) AND state = 'dead'
	ORDER BY id`

func (e executor) insertDeadLetters(ctx context.Context, tx *sql.Tx, failedAt time.Time, reason weirtype.AbandonReason, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	res, err := e.s.stmts.exec(ctx, tx, insertDeadLetter, string(reason), encodeTime(failedAt), idList(ids))
	if err != nil {
		return fmt.Errorf("write dead letters: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(ids)) {
		return fmt.Errorf("write dead letters: %d written for %d jobs (%v)", n, len(ids), err)
	}
	return nil
}

// snoozeJob makes the job ?5 at ?6 and gives back its attempt.
const snoozeJob = `UPDATE weir_jobs SET
	state = ?5, scheduled_at = ?6, attempt = max(attempt - 1, 0), updated_at = ?1, lease_owner = '', lease_expires_at = NULL
	` + leaseGuard + `
	RETURNING ` + jobColumns

// Snooze puts the job of lease l back to wait until until, giving back its
// attempt. Like an insert or a retry, a job whose until is not after now
// is available rather than scheduled (a claim takes it either way). When
// l is no longer held, or the job is missing, it returns an error wrapping
// store.ErrLeaseLost.
func (e executor) Snooze(ctx context.Context, now time.Time, l store.Lease, until time.Time) (*weirtype.Job, error) {
	err := store.FirstError(l.Validate(), checkNow(now), store.CheckSet("until", until), checkTime("until", until))
	if err != nil {
		return nil, fmt.Errorf("snooze job %d: %w", l.ID, err)
	}
	state := weirtype.StateScheduled
	if !until.After(now) {
		state = weirtype.StateAvailable
	}
	var job *weirtype.Job
	err = e.write(ctx, func(tx *sql.Tx) (err error) {
		job, err = e.guarded(ctx, tx, snoozeJob, now, l, string(state), encodeTime(until))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("snooze job %d: %w", l.ID, err)
	}
	return job, nil
}

const cancelJob = `UPDATE weir_jobs SET
	state = 'cancelled', finalized_at = ?1, updated_at = ?1, lease_owner = '', lease_expires_at = NULL
	WHERE id = ?2 AND state IN ('available', 'scheduled', 'running')
	RETURNING ` + jobColumns

// Cancel makes the job cancelled unless it is final (store.ErrFinal) or
// missing (store.ErrNotFound).
func (e executor) Cancel(ctx context.Context, now time.Time, id int64) (*weirtype.Job, error) {
	if err := checkNow(now); err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", id, err)
	}
	var job *weirtype.Job
	err := e.write(ctx, func(tx *sql.Tx) (err error) {
		job, err = scanJob(e.s.stmts.queryRow(ctx, tx, cancelJob, encodeTime(now), id))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var state string
		err = tx.QueryRowContext(ctx, "SELECT state FROM weir_jobs WHERE id = ?", id).Scan(&state)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: it is %s", store.ErrFinal, state)
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", id, err)
	}
	return job, nil
}

// rescueExpired takes, at time ?1, up to ?3 running jobs whose lease ended
// before ?1, oldest lease first: each with attempts left becomes available
// at ?1, each without dead; both get an error of type ?4 at ?2 (?1 as JSON)
// for their current attempt. The message is made here, from the job's own
// lease (to the millisecond). The selection names its index, the running
// jobs by lease expiry, so that the planner, which has no statistics,
// never takes another and sorts every running job.
const rescueExpired = `UPDATE weir_jobs SET
	state = CASE WHEN attempt < max_attempts THEN 'available' ELSE 'dead' END,
	scheduled_at = CASE WHEN attempt < max_attempts THEN ?1 ELSE scheduled_at END,
	finalized_at = CASE WHEN attempt < max_attempts THEN finalized_at ELSE ?1 END,
	updated_at = ?1, lease_owner = '', lease_expires_at = NULL,
	errors = json_insert(errors, '$[#]', json_object(
		'attempt', attempt,
		'at', ?2,
		'message', 'lease held by ' || lease_owner || ' expired at ' ||
			strftime('%Y-%m-%dT%H:%M:%fZ', lease_expires_at / 1e6, 'unixepoch'),
		'type', ?4))
	WHERE id IN (
		SELECT id FROM weir_jobs INDEXED BY weir_jobs_lease_expiry
		WHERE state = 'running' AND lease_expires_at < ?1
		ORDER BY lease_expires_at, id LIMIT ` + limit3 + `)
	RETURNING id, kind, queue, state`

// RescueExpired rescues up to limit running jobs whose lease ended before
// now, in one UPDATE, and writes the dead letters of those out of attempts
// (reason max_attempts_exceeded, last error the lease_expired one) in the
// same transaction. Each list is in id order.
func (e executor) RescueExpired(ctx context.Context, now time.Time, limit int) (rescued, dead []store.JobRef, err error) {
	if err := store.FirstError(checkNow(now), store.CheckLimit(limit)); err != nil {
		return nil, nil, fmt.Errorf("rescue expired leases: %w", err)
	}
	at := timeJSON(now)
	err = e.write(ctx, func(tx *sql.Tx) error {
		rescued, dead = nil, nil
		rows, err := e.s.stmts.query(ctx, tx, rescueExpired, encodeTime(now), at, limit, weirtype.ErrorTypeLeaseExpired)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var j store.JobRef
			var state string
			if err := rows.Scan(&j.ID, &j.Kind, &j.Queue, &state); err != nil {
				return err
			}
			if state == string(weirtype.StateDead) {
				dead = append(dead, j)
			} else {
				rescued = append(rescued, j)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		slices.SortFunc(dead, byID)
		return e.insertDeadLetters(ctx, tx, now, weirtype.AbandonMaxAttempts, store.IDsOf(dead))
	})
	if err != nil {
		return nil, nil, fmt.Errorf("rescue expired leases: %w", err)
	}
	slices.SortFunc(rescued, byID)
	return rescued, dead, nil
}

// byID orders jobs by id.
func byID(a, b store.JobRef) int { return cmp.Compare(a.ID, b.ID) }

// timeJSON is t as an AttemptError's "at": the JSON string time.Time
// marshals to, of t as the database keeps it, without the quotes.
func timeJSON(t time.Time) string {
	return storedTime(t).Format(time.RFC3339Nano)
}

// releaseOwnedWhere makes every running job owner ?5 holds available at
// ?1, its attempt less ?2 (1 to give it back, 0 to count it), with an error
// at ?3 (?1 as JSON) of message ?4 and type ?6 for its current attempt; a
// job whose counted attempt was its last becomes dead instead. It walks
// every running job, through their partial index: releases are rare and
// the running jobs few, and an index of their owners would cost every
// claim and every completion a write. releaseOwned takes them all;
// releaseOwnedExcept keeps those whose [id, owner, attempt] is in ?7 (a
// JSON array, as leaseList makes it).
const releaseOwnedWhere = `UPDATE weir_jobs SET
	state = CASE WHEN attempt - ?2 < max_attempts THEN 'available' ELSE 'dead' END,
	scheduled_at = CASE WHEN attempt - ?2 < max_attempts THEN ?1 ELSE scheduled_at END,
	finalized_at = CASE WHEN attempt - ?2 < max_attempts THEN finalized_at ELSE ?1 END,
	updated_at = ?1, lease_owner = '', lease_expires_at = NULL,
	attempt = max(attempt - ?2, 0),
	errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?3, 'message', ?4, 'type', ?6))
	WHERE state = 'running' AND lease_owner = ?5`

const (
	releaseOwned       = releaseOwnedWhere + ` RETURNING id, state`
	releaseOwnedExcept = releaseOwnedWhere + `
		AND NOT EXISTS (SELECT 1 FROM json_each(?7) AS k
			WHERE k.value ->> 0 = weir_jobs.id AND k.value ->> 1 = weir_jobs.lease_owner AND k.value ->> 2 = weir_jobs.attempt)
	RETURNING id, state`
)

// ReleaseOwned makes every running job owner holds available at now, in
// one UPDATE, and returns their ids in ascending order.
func (e executor) ReleaseOwned(ctx context.Context, now time.Time, owner string, giveBack bool) ([]int64, error) {
	less, msg := 0, "released by "+owner+"; the attempt counts"
	if giveBack {
		less, msg = 1, "released by "+owner+"; the attempt is given back"
	}
	ids, err := e.release(ctx, now, owner, releaseOwned, encodeTime(now), less, timeJSON(now), msg, owner, weirtype.ErrorTypeReleased)
	if err != nil {
		return nil, fmt.Errorf("release the jobs of %s: %w", owner, err)
	}
	return ids, nil
}

// ReleaseOwnedExcept gives back every running job owner holds at a lease
// not among keep, in one UPDATE, and returns their ids in ascending order.
func (e executor) ReleaseOwnedExcept(ctx context.Context, now time.Time, owner string, keep []store.Lease) ([]int64, error) {
	if err := store.CheckLeases(keep); err != nil {
		return nil, fmt.Errorf("release the jobs of %s: keep: %w", owner, err)
	}
	msg := "released by " + owner + ", which claimed it but does not run it (the claim's reply was lost); the attempt is given back"
	ids, err := e.release(ctx, now, owner, releaseOwnedExcept, encodeTime(now), 1, timeJSON(now), msg, owner, weirtype.ErrorTypeReleased, leaseList(keep))
	if err != nil {
		return nil, fmt.Errorf("release the jobs of %s it does not run: %w", owner, err)
	}
	return ids, nil
}

// release runs query, releaseOwned or releaseOwnedExcept, with args, in a
// write transaction, writes the dead letters of the jobs it made dead, and
// returns the ids of all in ascending order.
func (e executor) release(ctx context.Context, now time.Time, owner, query string, args ...any) ([]int64, error) {
	if err := store.FirstError(store.CheckOwner(owner), checkNow(now)); err != nil {
		return nil, err
	}
	var ids []int64
	err := e.write(ctx, func(tx *sql.Tx) error {
		ids = nil
		rows, err := e.s.stmts.query(ctx, tx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var dead []int64
		for rows.Next() {
			var id int64
			var state string
			if err := rows.Scan(&id, &state); err != nil {
				return err
			}
			ids = append(ids, id)
			if state == string(weirtype.StateDead) {
				dead = append(dead, id)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		slices.Sort(dead)
		return e.insertDeadLetters(ctx, tx, now, weirtype.AbandonMaxAttempts, dead)
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}
