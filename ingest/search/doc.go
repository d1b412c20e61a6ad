// Package search is the seam of the ingestion service's full-text index:
// the [Index] interface, the documents it holds ([Doc]), what a search
// returns ([Hit]), what reconciliation reads ([Entry]), the query syntax
// every backend accepts ([ParseQuery]) and the sentinel errors. The
// embedded backend is search/fts, an SQLite FTS5 file.
//
// # Derived data
//
// The index is derived from the service's SQL database, which is the
// source of truth. A backend may lose or drop its contents (search/fts
// recreates a file of another layout, or a damaged one, empty); the
// service then reindexes from SQL. Reconciliation pages through
// [Index.Entries] in id order and compares each entry's UpdatedAt with the
// row's updated_at: a row missing from the index, or newer than its entry,
// is Put again; an entry whose row is gone is Deleted.
//
// Times are kept to the microsecond (sub-microsecond parts are dropped,
// rounded toward the past) and come back in UTC, so that a row's
// updated_at, itself kept in microseconds, compares equal to its entry's.
// The zero time is kept as the zero time.
//
// # Query syntax
//
// [Index.Search] accepts any string a user types, and never fails with a
// syntax error; [ParseQuery] reads it as follows.
//
//   - Words separated by white space must all match (AND): deploy failed
//     finds the documents that hold both words, in any order.
//   - "Double-quoted text" is a phrase: its words must appear together and
//     in that order. A quote left open runs to the end of the query.
//   - A trailing * makes a word, or a phrase's last word, a prefix: conn*
//     finds connect, connection, connected; "tls hand"* finds "tls
//     handshake".
//   - Everything else is literal text. Operators of the backend's own
//     syntax (AND, OR, NOT, NEAR, parentheses, column:filters, ^, +, -)
//     have no special meaning: OR is the word "or". Punctuation inside a
//     word separates words the way the index's tokenizer does (foo-bar is
//     the phrase "foo bar"). A word or phrase with no letter or digit
//     (a lone *, "()", "!!!") is ignored.
//   - Matching ignores case and, in search/fts, diacritics (cafe finds
//     café) and English word endings (run finds running); see that
//     package for the effect of stemming on prefixes.
//
// A query that is empty or only white space is refused with an error
// wrapping [ErrInvalid] (a [*QueryError]); so is one longer than
// [MaxQueryBytes] or with more than [MaxQueryTerms] words and phrases. A
// query whose words are all ignored matches nothing. Invalid UTF-8 and
// control characters are read as spaces.
package search
