package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/ingest/reconcile"
	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// What started a reindex.
const (
	TriggerAPI           = admin.ReindexTriggerAPI // POST /api/admin/reindex
	TriggerCLI           = "cli"                   // weir reindex
	TriggerSchedule      = "schedule"              // the daily run
	TriggerSchemaVersion = "schema_version"        // the index was rebuilt for a new schema version
)

// ReindexRun is a reconciliation of the index with SQL, as
// ingest_reindex_runs keeps it and the admin API shows it: Total is the
// number of saved documents when the run began.
type ReindexRun = admin.ReindexRun

// ReindexStarted is the job a reindex request enqueued, or found waiting.
type ReindexStarted = admin.ReindexStarted

// The service is the admin API's Reindexer.
var _ admin.Reindexer = (*Service)(nil)

type reindexArgs struct {
	Trigger string `json:"trigger"`
}

func (reindexArgs) Kind() string { return KindReindex }

// StartReindex enqueues a reconciliation, which a worker of the service
// runs, unless one is waiting or running already: then it returns that
// one, with outcome duplicate_pending.
func (s *Service) StartReindex(ctx context.Context, trigger string) (ReindexStarted, error) {
	live, err := s.cfg.DB.Store.Executor().ListJobs(ctx, store.JobFilter{Kinds: []string{KindReindex},
		States: []weirtype.State{weirtype.StateAvailable, weirtype.StateScheduled, weirtype.StateRunning}, Limit: 1})
	if err != nil {
		return ReindexStarted{}, err
	}
	if len(live) > 0 {
		return ReindexStarted{JobID: live[0].ID, Outcome: weirtype.DuplicatePending}, nil
	}
	res, err := s.client.Insert(ctx, reindexArgs{Trigger: trigger}, nil)
	if err != nil {
		return ReindexStarted{}, err
	}
	return ReindexStarted{JobID: res.Job.ID, Outcome: res.Outcome}, nil
}

// reindexJob runs a reconciliation; one the index's breaker stopped waits
// for its next probe and runs again, without spending an attempt.
func (s *Service) reindexJob(ctx context.Context, j *weir.Job[reindexArgs]) error {
	_, err := s.Reindex(ctx, j.Args.Trigger, nil)
	return s.snoozeWhileOpen(err, "the search index's breaker is open; the reindex waits")
}

// Reindex first deletes from SQL the documents of versions replaced by a
// newer version of their file (see removeReplaced); then it compares the
// saved documents in SQL with the index and repairs, in batches, what is
// missing or stale there, and removes what SQL does not have (those
// documents among it); its progress is kept in ingest_reindex_runs, and passed to
// progress after each batch if it is not nil. A run left running by a
// process that died is taken up where it stopped.
func (s *Service) Reindex(ctx context.Context, trigger string, progress func(ReindexRun)) (ReindexRun, error) {
	s.reindex.Lock()
	defer s.reindex.Unlock()
	if err := s.removeReplaced(ctx); err != nil {
		return ReindexRun{}, err
	}
	now := s.cfg.Clock.Now()
	total, err := s.db.count(ctx, `SELECT count(*) FROM ingest_documents WHERE status = $1`, docSaved)
	if err != nil {
		return ReindexRun{}, err
	}
	run, err := s.resumableRun(ctx)
	if err != nil {
		return ReindexRun{}, err
	}
	if run.ID == 0 {
		run = ReindexRun{Trigger: trigger, Status: "running", StartedAt: now, UpdatedAt: now, Total: total}
		if err := s.db.SQL.QueryRowContext(ctx, `INSERT INTO ingest_reindex_runs (trigger, status, started_at, updated_at, total) VALUES ($1, $2, $3, $3, $4) RETURNING id`,
			trigger, run.Status, micros(now), total).Scan(&run.ID); err != nil {
			return ReindexRun{}, err
		}
	} else {
		s.log.Info("resuming a reindex run left unfinished", "run", run.ID, "after", run.LastID)
	}
	base := run
	save := func(p reconcile.Progress) error {
		run.Checked, run.Missing, run.Stale, run.Extra = base.Checked+p.Checked, base.Missing+p.Missing, base.Stale+p.Stale, base.Extra+p.Extra
		run.Repaired, run.LastID, run.UpdatedAt = base.Repaired+p.Repaired, p.LastID, s.cfg.Clock.Now()
		_, err := s.db.SQL.ExecContext(context.WithoutCancel(ctx), `UPDATE ingest_reindex_runs SET checked = $2, missing = $3, stale = $4, extra = $5, repaired = $6,
			last_id = $7, updated_at = $8 WHERE id = $1`, run.ID, run.Checked, run.Missing, run.Stale, run.Extra, run.Repaired, run.LastID, micros(run.UpdatedAt))
		return err
	}
	update := func(p reconcile.Progress) error {
		err := save(p)
		if progress != nil {
			progress(run)
		}
		return err
	}
	p, rerr := reconcile.Run(ctx, reconcile.Config{
		Source: reconcile.ListFunc(s.db.savedEntries),
		Index: reconcile.ListFunc(func(ctx context.Context, after string, limit int) ([]reconcile.Entry, error) {
			es, err := s.cfg.Index.Entries(ctx, after, limit)
			out := make([]reconcile.Entry, len(es))
			for i, e := range es {
				out[i] = reconcile.Entry{ID: e.ID, UpdatedAt: e.UpdatedAt}
			}
			return out, err
		}),
		Repair:   s.repair,
		Remove:   s.removeExtra,
		Batch:    s.cfg.ReindexBatch,
		After:    base.LastID,
		Progress: update,
	})
	uerr := save(p)
	end := s.cfg.Clock.Now()
	run.Status, run.FinishedAt = "done", &end
	if rerr != nil {
		run.Status, run.Error = "failed", rerr.Error()
	}
	_, ferr := s.db.SQL.ExecContext(context.WithoutCancel(ctx), `UPDATE ingest_reindex_runs SET status = $2, error = $3, finished_at = $4, updated_at = $4 WHERE id = $1`,
		run.ID, run.Status, run.Error, micros(end))
	if progress != nil {
		progress(run)
	}
	if rerr == nil {
		s.log.Info("reindex done", "run", run.ID, "trigger", run.Trigger, "checked", run.Checked, "missing", run.Missing, "stale", run.Stale, "extra", run.Extra, "repaired", run.Repaired)
	}
	return run, errors.Join(rerr, uerr, ferr)
}

// removeReplaced deletes the documents whose file has a newer version
// recorded with documents of its own: a newer version replaces its
// documents as it is parsed, so these are left by releases of the
// service that gave each version documents of its own (the first one's
// stayed searchable beside the second's). Versions are ordered by their
// change time and parse job, then, for rows made before those were kept,
// by the time they were recorded. The index entries of the documents
// removed go with the reconciliation that follows.
func (s *Service) removeReplaced(ctx context.Context) error {
	res, err := s.db.SQL.ExecContext(ctx, `DELETE FROM ingest_documents WHERE id IN (
		SELECT d.id FROM ingest_documents d JOIN ingest_files df ON df.id = d.file_id
		WHERE EXISTS (SELECT 1 FROM ingest_files f WHERE f.path = d.path AND f.id <> d.file_id AND f.documents > 0
			AND (f.version > df.version OR (f.version = df.version AND f.job > df.job)
				OR (f.version = df.version AND f.job = df.job AND f.created_at > df.created_at))))`)
	if err != nil {
		return fmt.Errorf("remove the documents of replaced versions: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		s.log.Info("reindex: removed the documents of versions their files replaced", "documents", n)
	}
	return nil
}

// resumableRun is the latest run left running with no update for a
// minute (its process died), or a zero run.
func (s *Service) resumableRun(ctx context.Context) (ReindexRun, error) {
	runs, err := s.ReindexRuns(ctx, 1)
	if err != nil || len(runs) == 0 {
		return ReindexRun{}, err
	}
	r := runs[0]
	if r.Status != "running" || s.cfg.Clock.Now().Sub(r.UpdatedAt) < time.Minute {
		return ReindexRun{}, nil
	}
	return r, nil
}

// removeExtra deletes from the index the ids SQL did not list as saved,
// but for those saved since the listing (a document indexed while the run
// went on).
func (s *Service) removeExtra(ctx context.Context, ids []string) error {
	gone := ids[:0:0]
	for _, id := range ids {
		d, err := s.db.document(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound) || (err == nil && d.Status != docSaved):
			gone = append(gone, id)
		case err != nil:
			return err
		}
	}
	if len(gone) == 0 {
		return nil
	}
	_, err := s.cfg.Index.Delete(ctx, gone...)
	return err
}

// repair writes SQL's current version of the documents ids to the index.
func (s *Service) repair(ctx context.Context, ids []string) error {
	docs := make([]search.Doc, 0, len(ids))
	for _, id := range ids {
		d, err := s.db.document(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		docs = append(docs, searchDoc(d))
	}
	if err := s.cfg.Index.Put(ctx, docs...); err != nil {
		return err
	}
	now := micros(s.cfg.Clock.Now())
	for _, d := range docs {
		if _, err := s.db.SQL.ExecContext(ctx, `UPDATE ingest_documents SET index_error = '', indexed_at = $2 WHERE id = $1`, d.ID, now); err != nil {
			return err
		}
	}
	return nil
}

// ReindexRuns lists the latest reindex runs, newest first.
func (s *Service) ReindexRuns(ctx context.Context, limit int) ([]ReindexRun, error) {
	rows, err := s.db.SQL.QueryContext(ctx, `SELECT id, trigger, status, started_at, updated_at, finished_at, total, checked, missing, stale, extra, repaired, last_id, error
		FROM ingest_reindex_runs ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ReindexRun
	for rows.Next() {
		var (
			r                ReindexRun
			started, updated int64
			finished         sql.NullInt64
		)
		if err := rows.Scan(&r.ID, &r.Trigger, &r.Status, &started, &updated, &finished, &r.Total, &r.Checked, &r.Missing, &r.Stale, &r.Extra,
			&r.Repaired, &r.LastID, &r.Error); err != nil {
			return nil, err
		}
		r.StartedAt, r.UpdatedAt = fromMicros(started), fromMicros(updated)
		if finished.Valid {
			t := fromMicros(finished.Int64)
			r.FinishedAt = &t
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reindex runs: %w", err)
	}
	return out, nil
}
