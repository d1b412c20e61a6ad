// Package fts is the ingestion service's embedded search index: a
// [search.Index] in an SQLite file of its own, indexed by SQLite's FTS5
// through the pure-Go driver modernc.org/sqlite.
//
// The index is derived data. The service's SQL database is the source of
// truth and lives in another file; this one can be deleted at any time and
// rebuilt by reindexing.
//
// # The file
//
// A document is a row of the table docs (id, title, body, key terms,
// summary, source, language, updated_at), keyed by an integer seq that is
// also the rowid of docs_fts, an FTS5 table with external content
// (content='docs'): the text is stored once, in docs, and FTS5 keeps only
// its inverted index of the columns title, body and terms. Triggers keep
// docs_fts in step with docs; an update that leaves the title, body and
// terms as they were (a Put that only moves updated_at) does not index
// the document again. The key terms are kept twice: joined by ", " in
// terms, which is indexed and shown in snippets, and as a JSON array in
// terms_json, which Get returns. updated_at is INTEGER microseconds since
// the Unix epoch, UTC, NULL for the zero time; ids are unique and indexed,
// so Entries reads them in order through that index.
//
// The file's header holds an application id ("WSIX", 0x57534958) and the
// layout's version in user_version ([SchemaVersion]). [Open]:
//
//   - creates the schema in a new or empty file;
//   - uses a file of this application id and SchemaVersion as it is, after
//     reading a row of each table (and, with Config.CheckIntegrity, after
//     SQLite's quick_check and FTS5's integrity-check);
//   - deletes and recreates, empty, a file of another SchemaVersion
//     (older or newer), one that is not an SQLite database (SQLITE_NOTADB)
//     or is damaged (SQLITE_CORRUPT), or lacks the index's tables; then
//     [Index.Rebuilt] is true and the caller must reindex everything;
//   - refuses, untouched, an SQLite database with tables and another
//     application id, with [ErrNotIndex]: the path may name the service's
//     own database by mistake, which must never be deleted;
//   - returns any other error (a permission, a lock) as it is: recreating
//     would not cure it.
//
// Damage that only appears later, in a page Open did not read, surfaces as
// an error of the call that reads it; the service may then close the
// index, delete the file and reindex.
//
// # Tokenizer
//
// tokenize='porter unicode61 remove_diacritics 2': unicode61 splits text
// into words of letters and digits and folds case; remove_diacritics 2
// folds accents, including those of characters that combine several (cafe
// finds café, resume finds résumé); porter then reduces English words to
// their stems, so run, runs and running are one word, as are deploy,
// deployed and deployment. The service's documents are mostly English
// notes and mailing lists, where stemming finds what users mean more
// often than it conflates words; for other languages porter mostly leaves
// words alone, since it strips only English endings.
//
// The price is paid by prefix queries: a prefix is matched against the
// stems in the index, not the words as written. deploy* and depl* find
// "deployment" (stored as deploy), but deploym* does not, nor does runn*
// find "running" (stored as run). Type the shorter prefix.
//
// The table keeps an index of 2-character prefixes (prefix='2'): a
// 2-letter prefix expands to the most words and was five times slower
// without it (97 ms against 17 ms on the benchmark's index), while longer
// prefixes expand to few words and gain little from an index of their
// own. The index costs about 15% of Put's time; one of 3-character
// prefixes as well would cost 50-90%.
//
// Changing the tokenizer changes what the index holds: bump SchemaVersion.
//
// # Queries, ranking and snippets
//
// [Index.Search] reads the user's query with [search.ParseQuery] and
// writes each term as an FTS5 string, "text" with its quotes doubled,
// followed by * for a prefix, the terms joined by AND. FTS5 gives no
// character inside a string a meaning, so no query can be read as an
// operator, a column filter or a syntax error.
//
// Hits are ranked by bm25 with the columns weighted title 10, terms 5,
// body 1; Hit.Score is minus bm25, so higher is better. FTS5 ranks the
// matches itself (ORDER BY rank) and computes snippets only for the hits
// returned, but ranking still reads every match: a word in most documents
// costs more than a rare one. Hits of equal score are returned in id
// order; which of several equal hits make the cut at the limit is FTS5's
// choice. Hit.Snippet is FTS5's snippet of the column that matches
// best, at most 16 words, each matched word between [MarkStart] and
// [MarkEnd] (« and »), and [Ellipsis] (…) where text was left out. The
// markers are not escaped: a document's own « or » looks the same.
//
// # Connections and concurrency
//
// As in store/sqlite, the file is in WAL mode with synchronous=NORMAL and
// a busy timeout (Config.BusyTimeout, 5 s by default), and an Index keeps
// two pools on it: one write connection whose transactions begin with
// BEGIN IMMEDIATE, for which Put and Delete queue inside the process, and
// several query_only connections for Get, Search, Entries and Count, which
// in WAL mode neither block the writer nor are blocked by it. An Index is
// safe for concurrent use. A Put of many documents is one transaction of
// one prepared statement; all the statements are prepared at Open.
package fts
