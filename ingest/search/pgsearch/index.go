package pgsearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weirhq/weir/ingest/search"
)

// sqlstateProgramLimitExceeded is PostgreSQL's error for a tsvector over
// its size limit ("string is too long for tsvector").
const sqlstateProgramLimitExceeded = "54000"

// Put inserts the documents, replacing those with the same ids, in one
// statement: either all are stored or none. Each is validated first
// (search.Doc.Validate, and checkText): an invalid one fails the call
// with search.ErrInvalid, storing nothing. When docs repeats an id, the
// last wins.
func (ix *Index) Put(ctx context.Context, docs ...search.Doc) error {
	if err := ix.checkOpen(); err != nil {
		return err
	}
	for i, d := range docs {
		if err := d.Validate(); err != nil {
			return fmt.Errorf("put: document %d: %w", i, err)
		}
		if err := checkDocText(d); err != nil {
			return fmt.Errorf("put: document %d: %w", i, err)
		}
	}
	if len(docs) == 0 {
		return nil
	}
	docs = lastOfEachID(docs)
	// The budget errs high; should a document's words still overflow
	// PostgreSQL's limit, it is indexed up to a smaller budget.
	var err error
	for budget := vocabularyBudget; budget >= vocabularyBudget/8; budget /= 2 {
		_, err = ix.pool.Exec(ctx, ix.sql.put, putArgs(docs, budget)...)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != sqlstateProgramLimitExceeded {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("put %d documents: %w", len(docs), err)
	}
	return nil
}

// lastOfEachID returns docs without the documents whose id comes again
// later, in order: one statement cannot write a row twice.
func lastOfEachID(docs []search.Doc) []search.Doc {
	if len(docs) == 1 {
		return docs
	}
	last := make(map[string]int, len(docs))
	for i, d := range docs {
		last[d.ID] = i
	}
	if len(last) == len(docs) {
		return docs
	}
	out := make([]search.Doc, 0, len(last))
	for i, d := range docs {
		if last[d.ID] == i {
			out = append(out, d)
		}
	}
	return out
}

// putArgs are the parallel arrays of putSQL.
func putArgs(docs []search.Doc, budget int) []any {
	n := len(docs)
	var (
		ids, titles, bodies, terms, termsText = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		summaries, sources, languages         = make([]string, n), make([]string, n), make([]string, n)
		titlesF, termsF, bodiesF              = make([]string, n), make([]string, n), make([]string, n)
		updated                               = make([]*int64, n)
		titleN, termsN, bodyN                 = make([]int32, n), make([]int32, n), make([]int32, n)
	)
	for i, d := range docs {
		ids[i], titles[i], bodies[i] = d.ID, d.Title, d.Body
		summaries[i], sources[i], languages[i] = d.Summary, d.Source, d.Language
		terms[i], termsText[i] = encodeTerms(d.Terms), strings.Join(d.Terms, ", ")
		titlesF[i], termsF[i], bodiesF[i] = fold(d.Title), fold(termsText[i]), fold(d.Body)
		if !d.UpdatedAt.IsZero() {
			us := d.UpdatedAt.UnixMicro()
			updated[i] = &us
		}
		caps := indexedPrefixes([3]string{titlesF[i], termsF[i], bodiesF[i]}, budget)
		titleN[i], termsN[i], bodyN[i] = caps[0], caps[1], caps[2]
	}
	return []any{ids, titles, bodies, terms, termsText, summaries, sources, languages, updated,
		titlesF, termsF, bodiesF, titleN, termsN, bodyN}
}

// encodeTerms is terms as a JSON array. Its strings are valid UTF-8
// (checkDocText), which json.Marshal keeps as they are.
func encodeTerms(terms []string) string {
	if len(terms) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(terms) // a []string always encodes
	return string(b)
}

// checkDocText returns an error wrapping search.ErrInvalid when a text of
// d cannot be stored in PostgreSQL, whose text holds valid UTF-8 and no
// NUL byte.
func checkDocText(d search.Doc) error {
	fields := []struct{ name, text string }{
		{"id", d.ID}, {"title", d.Title}, {"body", d.Body}, {"summary", d.Summary},
		{"source", d.Source}, {"language", d.Language},
	}
	for i, t := range d.Terms {
		fields = append(fields, struct{ name, text string }{fmt.Sprintf("key term %d", i), t})
	}
	for _, f := range fields {
		if problem := textProblem(f.text); problem != "" {
			return fmt.Errorf("%w: document %q: its %s %s, which PostgreSQL cannot store", search.ErrInvalid, d.ID, f.name, problem)
		}
	}
	return nil
}

// textProblem says why PostgreSQL cannot store s as text, or "".
func textProblem(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Sprintf("holds a NUL byte (at byte %d)", i)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	return ""
}

// Delete removes the documents with the ids in one statement, and returns
// how many there were. Ids not in the index are ignored (among them any
// that PostgreSQL could not store).
func (ix *Index) Delete(ctx context.Context, ids ...string) (int, error) {
	if err := ix.checkOpen(); err != nil {
		return 0, err
	}
	keep := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" && textProblem(id) == "" {
			keep = append(keep, id)
		}
	}
	if len(keep) == 0 {
		return 0, nil
	}
	tag, err := ix.pool.Exec(ctx, ix.sql.del, keep)
	if err != nil {
		return 0, fmt.Errorf("delete %d documents: %w", len(keep), err)
	}
	return int(tag.RowsAffected()), nil
}

// Get returns the document with the id, or an error wrapping
// search.ErrNotFound.
func (ix *Index) Get(ctx context.Context, id string) (search.Doc, error) {
	if err := ix.checkOpen(); err != nil {
		return search.Doc{}, err
	}
	if textProblem(id) != "" {
		return search.Doc{}, fmt.Errorf("get %q: %w", id, search.ErrNotFound)
	}
	d := search.Doc{ID: id}
	var updated *int64
	err := ix.pool.QueryRow(ctx, ix.sql.get, id).Scan(&d.Title, &d.Body, &d.Terms, &d.Summary, &d.Source, &d.Language, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return search.Doc{}, fmt.Errorf("get %q: %w", id, search.ErrNotFound)
	}
	if err != nil {
		return search.Doc{}, fmt.Errorf("get %q: %w", id, err)
	}
	if len(d.Terms) == 0 {
		d.Terms = nil
	}
	d.UpdatedAt = decodeTime(updated)
	return d, nil
}

// decodeTime is the time updated_at holds: the zero time for NULL, the
// instant in UTC otherwise.
func decodeTime(us *int64) time.Time {
	if us == nil {
		return time.Time{}
	}
	return time.UnixMicro(*us).UTC()
}

// Search returns up to limit documents matching query, best first (see the
// search package for the syntax, and doc.go for the ranking and the
// snippets). It fails with search.ErrInvalid for an empty query or a
// limit below one; a limit above search.MaxLimit is reduced to it. A query
// whose words are all ignored returns no hits.
func (ix *Index) Search(ctx context.Context, query string, limit int) ([]search.Hit, error) {
	limit, err := ix.checkLimit("search", limit)
	if err != nil {
		return nil, err
	}
	terms, err := search.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	hits := []search.Hit{}
	q, ok := compile(terms)
	if len(terms) == 0 || !ok {
		return hits, nil
	}
	rows, err := ix.pool.Query(ctx, ix.sql.find, q.all, limit, q.each, q.anyTerm, q.words)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		var h search.Hit
		var score float32
		var updated *int64
		var hl headline
		var at, total *int32
		var text, before *string
		if err := rows.Scan(&h.ID, &h.Title, &h.Source, &h.Summary, &updated, &score,
			&hl.marked, &at, &text, &before, &total); err != nil {
			return nil, fmt.Errorf("search %q: %w", query, err)
		}
		if at != nil && text != nil && before != nil && total != nil {
			hl.at, hl.text, hl.before, hl.total = int(*at), *text, *before, int(*total)
		}
		h.Snippet = snippet(hl)
		h.Score = float64(score)
		h.UpdatedAt = decodeTime(updated)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	return hits, nil
}

// Entries returns up to limit entries whose ids are greater than after, in
// id order (byte order). search.ErrInvalid for a limit below one, or an
// after that PostgreSQL cannot hold (a NUL byte, invalid UTF-8); a limit
// above search.MaxLimit is reduced to it.
func (ix *Index) Entries(ctx context.Context, after string, limit int) ([]search.Entry, error) {
	limit, err := ix.checkLimit("entries", limit)
	if err != nil {
		return nil, err
	}
	if problem := textProblem(after); problem != "" {
		return nil, fmt.Errorf("entries: %w: after %q %s", search.ErrInvalid, after, problem)
	}
	rows, err := ix.pool.Query(ctx, ix.sql.entries, after, limit)
	if err != nil {
		return nil, fmt.Errorf("entries after %q: %w", after, err)
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (search.Entry, error) {
		var e search.Entry
		var updated *int64
		err := row.Scan(&e.ID, &updated)
		e.UpdatedAt = decodeTime(updated)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("entries after %q: %w", after, err)
	}
	if entries == nil {
		entries = []search.Entry{}
	}
	return entries, nil
}

// Count returns how many documents the index holds.
func (ix *Index) Count(ctx context.Context) (int, error) {
	if err := ix.checkOpen(); err != nil {
		return 0, err
	}
	var n int
	if err := ix.pool.QueryRow(ctx, ix.sql.count).Scan(&n); err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return n, nil
}

// checkLimit is search.CheckLimit for the call op, on an open index.
func (ix *Index) checkLimit(op string, limit int) (int, error) {
	if err := ix.checkOpen(); err != nil {
		return 0, err
	}
	limit, err := search.CheckLimit(limit)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return limit, nil
}
