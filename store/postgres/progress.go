package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// resultsQueries are the statements of what a running attempt reports.
type resultsQueries struct {
	setProgress, completeOutputs string
}

func newResultsQueries(schema string) resultsQueries {
	jobs := schema + `.weir_jobs`
	return resultsQueries{
		setProgress: `UPDATE ` + jobs + ` SET progress = $5::jsonb, updated_at = $4::timestamptz
WHERE ` + held + `
RETURNING id`,
		// The completions come as CompleteMany's leases do, with a
		// fourth array of outputs (NULL for none).
		completeOutputs: `UPDATE ` + jobs + ` AS j SET state = 'completed', finalized_at = $4::timestamptz, updated_at = $4::timestamptz,
	` + dropLease + `, output = l.output::jsonb
FROM unnest($1::bigint[], $2::text[], $3::bigint[], $5::text[]) AS l(id, owner, attempt, output)
WHERE j.id = l.id AND j.state = 'running' AND j.lease_owner = l.owner AND j.attempt = l.attempt
RETURNING j.id`,
	}
}

// SetProgress records p as the progress of the job of lease l; see
// store.Results.
func (e executor) SetProgress(ctx context.Context, now time.Time, l store.Lease, p weirtype.Progress) error {
	const op = "set progress"
	p.Attempt, p.At = l.Attempt, micro(now)
	if err := refuse(op, l.Validate(), store.CheckNow(now), p.Validate()); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return invalid(op, "progress: %v", err)
	}
	q := newResultsQueries(e.s.sql.schema)
	return e.run(ctx, func(db querier) error {
		var id int64
		err := db.QueryRow(ctx, q.setProgress, l.ID, l.Owner, int64(l.Attempt), p.At, string(b)).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return e.leaseLost(ctx, db, op, l)
		}
		if err != nil {
			return dbError(op, err)
		}
		return nil
	})
}

// CompleteOutputs completes, in one statement, the jobs of the
// completions whose leases are still held, each with its output; see
// store.Results.
func (e executor) CompleteOutputs(ctx context.Context, now time.Time, cs []store.Completion) ([]int64, error) {
	const op = "complete with outputs"
	if err := refuse(op, store.CheckCompletions(cs), store.CheckNow(now)); err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, nil
	}
	leases := make([]store.Lease, len(cs))
	outputs := make([]*string, len(cs))
	for i, c := range cs {
		leases[i] = c.Lease
		if len(c.Output) > 0 && !bytes.Equal(bytes.TrimSpace(c.Output), []byte("null")) {
			s := string(c.Output)
			outputs[i] = &s
		}
	}
	ids, owners, attempts := leaseArrays(leases)
	q := newResultsQueries(e.s.sql.schema)
	done, err := e.queryIDs(ctx, op, q.completeOutputs, planEachCall, ids, owners, attempts, micro(now), outputs)
	if err != nil {
		return nil, err
	}
	return notDone(leases, done), nil
}
