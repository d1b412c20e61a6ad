package pipeline

import (
	"context"
	"errors"

	"fmt"
	"time"

	"github.com/weirhq/weir/store/appdb"

	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Search searches the index.
func (s *Service) Search(ctx context.Context, query string, limit int) ([]search.Hit, error) {
	return s.cfg.Index.Search(ctx, query, limit)
}

// Document returns the document id as SQL keeps it; ErrNotFound if there
// is none.
func (s *Service) Document(ctx context.Context, id string) (Document, error) {
	return s.db.document(ctx, id)
}

// Progress is how far a set of files has come.
type Progress struct {
	Files, FilesDone, FilesFailed int
	Documents, Saved, Failed      int
	// Indexed counts the saved documents indexed, or whose indexing
	// failed and waits for reconciliation.
	Indexed int
}

// Done reports whether every file has ended and every saved document is
// indexed (or left to reconciliation).
func (p Progress) Done() bool { return p.FilesDone+p.FilesFailed >= p.Files && p.Indexed >= p.Saved }

// FileProgress says how far the files ids have come: a file is done once
// processed (or superseded by a newer version of its path), failed once
// failed (parse failures appear once the sweep has written them).
func (s *Service) FileProgress(ctx context.Context, ids []string) (Progress, error) {
	p := Progress{Files: len(ids)}
	for _, id := range ids {
		f, err := s.db.file(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // not parsed yet
		}
		if err != nil {
			return p, err
		}
		switch f.Status {
		case fileProcessed, fileSuperseded:
			p.FilesDone++
		case fileFailed:
			p.FilesFailed++
		}
		saved, err := s.db.count(ctx, `SELECT count(*) FROM ingest_documents WHERE file_id = $1 AND status = $2`, id, docSaved)
		if err != nil {
			return p, err
		}
		failed, err := s.db.count(ctx, `SELECT count(*) FROM ingest_documents WHERE file_id = $1 AND status = $2`, id, docFailed)
		if err != nil {
			return p, err
		}
		indexed, err := s.db.count(ctx, `SELECT count(*) FROM ingest_documents WHERE file_id = $1 AND status = $2 AND (indexed_at > 0 OR index_error <> '')`, id, docSaved)
		if err != nil {
			return p, err
		}
		p.Documents += f.Documents
		p.Indexed += indexed
		p.Saved += saved
		p.Failed += failed
	}
	return p, nil
}

// Status is the service's state, for `weir status` and the API.
type Status struct {
	// Files and Documents count by status.
	Files     map[string]int `json:"files"`
	Documents map[string]int `json:"documents"`
	// Indexed is the number of entries in the index; IndexErrors the saved
	// documents whose last index attempt failed.
	Indexed     int `json:"indexed"`
	IndexErrors int `json:"index_errors"`
	// IndexDown, when the index did not answer (its database gone, its
	// breaker open), says why; Indexed is 0 then. The rest of the status
	// is read all the same.
	IndexDown string `json:"index_down,omitempty"`
	// Jobs counts the jobs by kind and state; Stuck those stuck.
	Jobs  map[string]map[weirtype.State]int `json:"jobs"`
	Stuck int                               `json:"stuck"`
	// DeadLetters is the number of dead letters.
	DeadLetters int `json:"dead_letters"`
	// Breakers are the states of the extractor's breaker and the index's,
	// of those that have one.
	Breakers map[string]string `json:"breakers,omitempty"`
	// LastReindex is the latest reindex run.
	LastReindex *ReindexRun `json:"last_reindex,omitempty"`
}

// Status reads the service's state. stuckAfter is how long a job may go
// before it counts as stuck (default 10 minutes).
func (s *Service) Status(ctx context.Context, stuckAfter time.Duration) (Status, error) {
	if stuckAfter <= 0 {
		stuckAfter = store.DefaultStuckAfter
	}
	st := Status{Files: map[string]int{}, Documents: map[string]int{}, Jobs: map[string]map[weirtype.State]int{}}
	for _, q := range []struct {
		table string
		into  map[string]int
	}{{"ingest_files", st.Files}, {"ingest_documents", st.Documents}} {
		rows, err := s.db.SQL.QueryContext(ctx, `SELECT status, count(*) FROM `+q.table+` GROUP BY status`)
		if err != nil {
			return st, err
		}
		for rows.Next() {
			var (
				k string
				n int
			)
			if err := rows.Scan(&k, &n); err != nil {
				rows.Close()
				return st, err
			}
			q.into[k] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return st, err
		}
	}
	var err error
	if st.Indexed, err = s.cfg.Index.Count(ctx); err != nil {
		if ctx.Err() != nil {
			return st, err
		}
		st.IndexDown = err.Error()
	}
	if st.IndexErrors, err = s.db.count(ctx, `SELECT count(*) FROM ingest_documents WHERE index_error <> ''`); err != nil {
		return st, err
	}
	counts, err := s.cfg.DB.Store.Executor().CountJobs(ctx, s.cfg.Clock.Now().Add(-stuckAfter))
	if err != nil {
		return st, err
	}
	for _, c := range counts {
		if st.Jobs[c.Kind] == nil {
			st.Jobs[c.Kind] = map[weirtype.State]int{}
		}
		st.Jobs[c.Kind][c.State] += c.Count
		st.Stuck += c.Stuck
	}
	dls, err := s.cfg.DB.Store.Executor().ListDeadLetters(ctx, store.DeadLetterFilter{})
	if err != nil {
		return st, err
	}
	st.DeadLetters = len(dls)
	for _, dep := range []any{s.cfg.Extractor, s.cfg.Index} {
		if b, ok := dep.(interface{ Breaker() *breaker.Breaker }); ok {
			if st.Breakers == nil {
				st.Breakers = map[string]string{}
			}
			br := b.Breaker()
			st.Breakers[br.Name()] = br.State().String()
		}
	}
	if runs, err := s.ReindexRuns(ctx, 1); err == nil && len(runs) > 0 {
		st.LastReindex = &runs[0]
	}
	return st, nil
}

// Ready reports whether the database and the index answer.
func (s *Service) Ready(ctx context.Context) error {
	if err := s.cfg.DB.SQL.PingContext(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if _, err := s.cfg.Index.Count(ctx); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// DB is the service's database.
func (s *Service) DB() *appdb.DB { return s.cfg.DB }
