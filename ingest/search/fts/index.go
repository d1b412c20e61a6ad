package fts

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weirhq/weir/internal/sqlitefile"

	"github.com/weirhq/weir/ingest/search"
)

// The snippet's markers (see doc.go).
const (
	// MarkStart and MarkEnd enclose each matched word of a Hit's Snippet.
	MarkStart = "«"
	MarkEnd   = "»"
	// Ellipsis stands for the text a Snippet leaves out.
	Ellipsis = "…"
	// snippetTokensSQL is how many words a snippet holds at most (FTS5
	// allows 64).
	snippetTokensSQL = "16"
)

// rankFunction is the ranking of Search: bm25 with the columns weighted
// in docs_fts's order (title, body, terms), so that a match in the title
// counts ten times one in the body, and a key term five times.
const rankFunction = "bm25(10.0, 1.0, 5.0)"

const (
	putQuery = `INSERT INTO docs (id, title, body, terms, terms_json, summary, source, language, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (id) DO UPDATE SET title = excluded.title, body = excluded.body, terms = excluded.terms,
	terms_json = excluded.terms_json, summary = excluded.summary, source = excluded.source,
	language = excluded.language, updated_at = excluded.updated_at`

	deleteQuery = `DELETE FROM docs WHERE id = ?1`

	getQuery = `SELECT title, body, terms_json, summary, source, language, updated_at FROM docs WHERE id = ?1`

	// ORDER BY rank (FTS5's hidden column, with the ranking function
	// given by rank MATCH) lets FTS5 rank the matches itself and hand
	// them over best first, so that snippet() runs only for the rows
	// returned; ordering by an expression would compute the snippet of
	// every match before the sort (2-3 times slower on a common word).
	// The limit is cast: SQLite compiles a bare parameter of a LIMIT into
	// the statement, and compiles it again whenever the value changes.
	searchQuery = `SELECT d.id, d.title, d.source, d.summary,
	snippet(docs_fts, -1, '` + MarkStart + `', '` + MarkEnd + `', '` + Ellipsis + `', ` + snippetTokensSQL + `),
	rank, d.updated_at
FROM docs_fts JOIN docs AS d ON d.seq = docs_fts.rowid
WHERE docs_fts MATCH ?1 AND rank MATCH ?3
ORDER BY rank
LIMIT CAST(?2 AS INTEGER)`

	entriesQuery = `SELECT id, updated_at FROM docs WHERE id > ?1 ORDER BY id LIMIT CAST(?2 AS INTEGER)`

	countQuery = `SELECT count(*) FROM docs`
)

// prepare prepares the index's statements, once the schema exists.
func (ix *Index) prepare(ctx context.Context) error {
	var err error
	for _, p := range []struct {
		db    *sql.DB
		query string
		st    **sql.Stmt
	}{
		{ix.write, putQuery, &ix.put},
		{ix.write, deleteQuery, &ix.del},
		{ix.read, getQuery, &ix.get},
		{ix.read, searchQuery, &ix.find},
		{ix.read, entriesQuery, &ix.entries},
		{ix.read, countQuery, &ix.count},
	} {
		if *p.st, err = p.db.PrepareContext(ctx, p.query); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}

// Put inserts the documents, replacing those with the same ids, in one
// transaction. Each is validated first (search.Doc.Validate): an invalid
// one fails the call with search.ErrInvalid, storing nothing. When docs
// repeats an id, the last wins. A document whose title, body and terms
// are unchanged is not indexed again.
func (ix *Index) Put(ctx context.Context, docs ...search.Doc) error {
	for i, d := range docs {
		if err := d.Validate(); err != nil {
			return fmt.Errorf("put: document %d: %w", i, err)
		}
	}
	if len(docs) == 0 {
		return nil
	}
	tx, err := ix.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("put: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	st := tx.StmtContext(ctx, ix.put)
	var buf bytes.Buffer
	for _, d := range docs {
		termsJSON, err := encodeTerms(&buf, d.Terms)
		if err != nil {
			return fmt.Errorf("put %q: %w", d.ID, err)
		}
		if _, err := st.ExecContext(ctx, d.ID, d.Title, d.Body, strings.Join(d.Terms, ", "), termsJSON,
			d.Summary, d.Source, d.Language, encodeTime(d.UpdatedAt)); err != nil {
			return fmt.Errorf("put %q: %w", d.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("put: commit: %w", err)
	}
	return nil
}

// encodeTerms is terms as a JSON array, written without HTML escapes.
func encodeTerms(buf *bytes.Buffer, terms []string) (string, error) {
	if len(terms) == 0 {
		return "[]", nil
	}
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(terms); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// Delete removes the documents with the ids in one transaction, and
// returns how many there were. Ids not in the index are ignored.
func (ix *Index) Delete(ctx context.Context, ids ...string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tx, err := ix.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("delete: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	st := tx.StmtContext(ctx, ix.del)
	deleted := 0
	for _, id := range ids {
		res, err := st.ExecContext(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("delete %q: %w", id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("delete %q: %w", id, err)
		}
		deleted += int(n)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("delete: commit: %w", err)
	}
	return deleted, nil
}

// Get returns the document with the id, or an error wrapping
// search.ErrNotFound.
func (ix *Index) Get(ctx context.Context, id string) (search.Doc, error) {
	d := search.Doc{ID: id}
	var termsJSON string
	var updated sql.NullInt64
	err := ix.get.QueryRowContext(ctx, id).Scan(&d.Title, &d.Body, &termsJSON, &d.Summary, &d.Source, &d.Language, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return search.Doc{}, fmt.Errorf("get %q: %w", id, search.ErrNotFound)
	}
	if err != nil {
		return search.Doc{}, fmt.Errorf("get %q: %w", id, err)
	}
	if termsJSON != "[]" {
		if err := json.Unmarshal([]byte(termsJSON), &d.Terms); err != nil {
			return search.Doc{}, fmt.Errorf("get %q: terms: %w", id, err)
		}
	}
	d.UpdatedAt = decodeTime(updated)
	return d, nil
}

// Search returns up to limit documents matching query, best first (see
// the search package for the syntax and doc.go for the ranking). It
// fails with search.ErrInvalid for an empty query or a limit below one; a
// limit above search.MaxLimit is reduced to it. A query whose words are
// all ignored returns no hits.
func (ix *Index) Search(ctx context.Context, query string, limit int) ([]search.Hit, error) {
	limit, err := search.CheckLimit(limit)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	terms, err := search.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	hits := []search.Hit{}
	if len(terms) == 0 {
		return hits, nil
	}
	rows, err := ix.find.QueryContext(ctx, matchExpr(terms), limit, rankFunction)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		var h search.Hit
		var rank float64
		var updated sql.NullInt64
		if err := rows.Scan(&h.ID, &h.Title, &h.Source, &h.Summary, &h.Snippet, &rank, &updated); err != nil {
			return nil, fmt.Errorf("search %q: %w", query, err)
		}
		h.Score = -rank // bm25 is lower for better matches
		h.UpdatedAt = decodeTime(updated)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	// FTS5 leaves the order of equal scores open: order them by id.
	slices.SortStableFunc(hits, func(a, b search.Hit) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), strings.Compare(a.ID, b.ID))
	})
	return hits, nil
}

// matchExpr is the FTS5 query of terms: each a double-quoted string (its
// own double quotes doubled), followed by * for a prefix, all ANDed.
// Inside a string FTS5 gives no character a meaning but the quote, so no
// term can be read as an operator, a column filter or a syntax error.
func matchExpr(terms []search.Term) string {
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteString(" AND ")
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(t.Text, `"`, `""`))
		b.WriteByte('"')
		if t.Prefix {
			b.WriteByte('*')
		}
	}
	return b.String()
}

// Entries returns up to limit entries whose ids are greater than after, in
// id order (byte order). search.ErrInvalid for a limit below one; a limit
// above search.MaxLimit is reduced to it.
func (ix *Index) Entries(ctx context.Context, after string, limit int) ([]search.Entry, error) {
	limit, err := search.CheckLimit(limit)
	if err != nil {
		return nil, fmt.Errorf("entries: %w", err)
	}
	rows, err := ix.entries.QueryContext(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("entries after %q: %w", after, err)
	}
	defer rows.Close()
	entries := []search.Entry{}
	for rows.Next() {
		var e search.Entry
		var updated sql.NullInt64
		if err := rows.Scan(&e.ID, &updated); err != nil {
			return nil, fmt.Errorf("entries after %q: %w", after, err)
		}
		e.UpdatedAt = decodeTime(updated)
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("entries after %q: %w", after, err)
	}
	return entries, nil
}

// Count returns how many documents the index holds.
func (ix *Index) Count(ctx context.Context) (int, error) {
	var n int
	if err := ix.count.QueryRowContext(ctx).Scan(&n); err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return n, nil
}

// encodeTime and decodeTime are sqlitefile's.
var (
	encodeTime = sqlitefile.EncodeTime
	decodeTime = sqlitefile.DecodeTime
)
