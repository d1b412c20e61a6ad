package postgres

import (
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// insertManySQL is the statement that inserts the jobs without an
// idempotency key, however many, as one INSERT over arrays of their
// columns, one element per job: $1 kinds, $2 queues, $3 payloads (JSON
// text), $4 states, $5 max attempts, $6 sources, $7 priorities, $8
// scheduled times, $9 deadlines (NULL for none); $10 is the insert's time.
// One statement parses, plans and writes the rows in one pass where one
// INSERT per job paid each step per job: about half the database's CPU per
// job of a producer's batch. Only the ids come back, which the identity
// column hands out in the order of the arrays: every other column is
// what the statement was given (see readUnkeyed), and returning the rows
// whole had the server write each job's columns, its payload as JSON
// text, and the client read them back, a producer's CPU per job.
func insertManySQL(schema string) string {
	return `INSERT INTO ` + schema + `.weir_jobs
	(kind, queue, payload, state, max_attempts, source, priority, scheduled_at, created_at, updated_at, deadline_at)
SELECT kind, queue, payload::jsonb, state, max_attempts, source, priority, scheduled_at, $10::timestamptz, $10::timestamptz, deadline_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::integer[], $6::text[], $7::integer[],
	$8::timestamptz[], $9::timestamptz[])
	AS t(kind, queue, payload, state, max_attempts, source, priority, scheduled_at, deadline_at)
RETURNING id`
}

// unkeyedRun returns the length of the run of consecutive jobs without an
// idempotency key that starts at ps[i], or 0 when ps[i] has a key or
// follows a job without one (it belongs to an earlier run).
func unkeyedRun(ps []store.InsertParams, i int) int {
	if ps[i].IdempotencyKey != "" || (i > 0 && ps[i-1].IdempotencyKey == "") {
		return 0
	}
	n := 1
	for i+n < len(ps) && ps[i+n].IdempotencyKey == "" {
		n++
	}
	return n
}

// queueUnkeyed queues on b the statement that inserts ps, jobs without an
// idempotency key.
func (s *Store) queueUnkeyed(b *pgx.Batch, now time.Time, ps []store.InsertParams) {
	n := len(ps)
	var (
		kinds, queues, payloads, states, sources = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		maxAttempts, priorities                  = make([]int32, n), make([]int32, n)
		scheduled                                = make([]time.Time, n)
		deadlines                                = make([]pgtype.Timestamptz, n)
	)
	for k, p := range ps {
		kinds[k], queues[k], payloads[k] = p.Kind, p.Queue, string(p.Payload)
		states[k], sources[k] = string(p.InitialState(now)), p.Source
		// Insert has checked that both fit in an int32.
		maxAttempts[k], priorities[k] = int32(p.MaxAttempts), int32(p.Priority)
		scheduled[k] = p.ScheduledFor(now)
		deadlines[k] = nullTime(p.DeadlineAt)
	}
	b.Queue(s.sql.insertMany, kinds, queues, payloads, states, maxAttempts, sources, priorities, scheduled, deadlines, now)
}

// readUnkeyed reads the ids the statement queueUnkeyed queued for ps
// returned, the next result of br, into res, one result per job: the job
// as ps gave it, inserted at now (times as the columns keep them, in UTC
// to the microsecond; the payload as given, which the jsonb column keeps
// in its own form: a read of the job returns that form). first is the
// first job's position in the insert's parameters. The identity column
// hands out ids in the order the rows are inserted, which is the order
// of the arrays, so the ids sorted are the jobs' in order.
func readUnkeyed(br pgx.BatchResults, first int, now time.Time, ps []store.InsertParams, res []store.InsertResult) error {
	fail := func(err error) error {
		if len(res) == 1 {
			return insertError(first, err)
		}
		// One statement cannot say which of its jobs failed.
		return dbError(fmt.Sprintf("insert jobs[%d:%d]", first, first+len(res)), err)
	}
	rows, err := br.Query()
	if err != nil {
		return fail(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fail(err)
	}
	if len(ids) != len(res) {
		return fail(fmt.Errorf("%d jobs inserted of %d", len(ids), len(res)))
	}
	slices.Sort(ids)
	at := micro(now)
	jobs := make([]weirtype.Job, len(ids)) // one allocation for the batch
	for k, id := range ids {
		p := ps[k]
		j := &jobs[k]
		*j = weirtype.Job{
			ID: id, Kind: p.Kind, Queue: p.Queue, Payload: p.Payload, State: p.InitialState(now),
			MaxAttempts: p.MaxAttempts, Source: p.Source, Priority: p.Priority,
			ScheduledAt: micro(p.ScheduledFor(now)), CreatedAt: at, UpdatedAt: at,
		}
		if !p.DeadlineAt.IsZero() {
			j.DeadlineAt = micro(p.DeadlineAt)
		}
		res[k] = store.InsertResult{Job: j, Outcome: weirtype.Inserted}
	}
	return nil
}
