package fts

import (
	"context"
	"database/sql"
	"fmt"
)

// schema is the index's layout at SchemaVersion (see doc.go). Its
// statements are idempotent, so that two processes creating one new file
// at once both succeed.
var schema = fmt.Sprintf(`
CREATE TABLE IF NOT EXISTS docs (
	seq        INTEGER PRIMARY KEY,  -- the FTS5 rowid
	id         TEXT NOT NULL UNIQUE,
	title      TEXT NOT NULL,
	body       TEXT NOT NULL,
	terms      TEXT NOT NULL,        -- the key terms joined by ", ": indexed, shown in snippets
	terms_json TEXT NOT NULL,        -- the key terms as a JSON array: what Get returns
	summary    TEXT NOT NULL,
	source     TEXT NOT NULL,
	language   TEXT NOT NULL,
	updated_at INTEGER               -- microseconds since the Unix epoch, UTC; NULL for the zero time
);

CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
	title, body, terms,
	content = 'docs', content_rowid = 'seq',
	tokenize = 'porter unicode61 remove_diacritics 2',
	prefix = '2'
);

CREATE TRIGGER IF NOT EXISTS docs_ai AFTER INSERT ON docs BEGIN
	INSERT INTO docs_fts(rowid, title, body, terms) VALUES (new.seq, new.title, new.body, new.terms);
END;

CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
	INSERT INTO docs_fts(docs_fts, rowid, title, body, terms) VALUES ('delete', old.seq, old.title, old.body, old.terms);
END;

-- Only a change of the indexed text is indexed again: a Put that changes
-- only updated_at, the summary or the source does not touch docs_fts.
CREATE TRIGGER IF NOT EXISTS docs_au AFTER UPDATE ON docs
WHEN old.title IS NOT new.title OR old.body IS NOT new.body OR old.terms IS NOT new.terms BEGIN
	INSERT INTO docs_fts(docs_fts, rowid, title, body, terms) VALUES ('delete', old.seq, old.title, old.body, old.terms);
	INSERT INTO docs_fts(rowid, title, body, terms) VALUES (new.seq, new.title, new.body, new.terms);
END;

PRAGMA application_id = %d;
PRAGMA user_version = %d;
`, applicationID, SchemaVersion)

// createSchema creates the index's tables in one write transaction.
func createSchema(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return err
	}
	return tx.Commit()
}
