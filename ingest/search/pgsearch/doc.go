// Package pgsearch is the ingestion service's search index in PostgreSQL:
// a [search.Index] in tables of the store's database, indexed by
// PostgreSQL's full-text search (a tsvector column with a GIN index), so
// that processes on several machines share one index without sharing a
// file system. It passes the same conformance suite as search/fts
// (search/searchtest); where the two differ, the difference is declared
// there (see Differences below).
//
// # Tables
//
// The index lives in a schema of the caller's choice (Config.Schema; the
// store's, for the service), beside the service's own tables:
//
//   - weir_search_docs: a document a row, keyed by its id (text COLLATE
//     "C", so that ids compare, and Entries reads them in order through
//     the primary key, byte by byte as Go compares strings). It keeps the
//     fields as given (title, body, the key terms as JSON and joined by
//     ", ", summary, source, language, updated_at in microseconds since
//     the Unix epoch, NULL for the zero time), the searchable form of the
//     title, key terms and body (title_f, terms_f, body_f: see below), and
//     tsv, their tsvector, with a GIN index. The title's lexemes weigh A,
//     the key terms' B, the body's D. tsv is written by Put (a maintained
//     column, not a generated one, so that a body too large for a
//     tsvector can be indexed in part).
//   - weir_search_meta: the layout's version ([SchemaVersion]).
//   - the text search configuration weir_search: PostgreSQL's english
//     with its stemmer replaced by weir_search_stem, Snowball's English
//     stemmer without stop words (every word is indexed: "the fox" is a
//     phrase of two words, and AND is the word "and").
//
// [Open] makes them in one transaction that holds an advisory lock of the
// schema's (pg_advisory_xact_lock, the key derived from the schema's
// name), so that processes starting at once on a new schema make them
// once; it recreates tables of an older SchemaVersion (or an incomplete
// set) empty, and [Index.Rebuilt] then tells the caller to reindex
// everything; it refuses tables of a newer SchemaVersion with
// [ErrSchemaTooNew], leaving them as they are, so that an older weir
// started beside a newer one does not drop the newer's index. With
// Config.MustExist it makes nothing, for a command that only reads.
// Changing the tables, the configuration or the searchable form changes
// what the index holds: bump SchemaVersion.
//
// # The searchable form
//
// PostgreSQL's parser reads URLs, e-mail addresses, host names, file
// paths and version numbers as single tokens: to_tsvector of
// alice@example.com holds only alice@example.com, and a search for alice
// would not find it. The query syntax of weir splits a word at
// punctuation (search.ParseQuery), and search/fts's tokenizer does the
// same to the text. So pgsearch indexes a searchable form of each text,
// made in Go: letters and digits lower-cased and without their
// diacritics (é is e, whether written precomposed or with a combining
// accent; ø is o), every other character a space. PostgreSQL then sees
// plain words, split where the query's are, and the query's words go
// through the same form, so cafe finds café and café finds cafe. The
// form keeps one character for each character of the text, which lets a
// snippet made of it be written back in the text's own characters.
//
// # Queries
//
// [Index.Search] reads the user's query with search.ParseQuery and builds
// the tsquery from its terms, not from the user's text: each word of a
// term's searchable form becomes a quoted operand ('word'; it holds only
// letters, digits and marks, so nothing in it is tsquery syntax, and its
// quotes are doubled all the same), the words of a term are joined by
// <-> (followed by: a phrase, or a word that punctuation split), a prefix
// term's last word gets :*, and the terms are joined by &; to_tsquery
// then stems each operand. A user's query is never parsed as tsquery
// syntax, so OR, !, & and parentheses are words or punctuation as the
// query syntax says, never operators, and no query is a syntax error.
// (websearch_to_tsquery is not used: it reads OR and - as operators,
// which weir's syntax documents as a word and as punctuation, and has no
// prefix.) A term that PostgreSQL cannot index (a word of more than 2,047
// bytes) matches nothing, rather than dropping out of the AND.
//
// # Ranking and snippets
//
// Hits are ranked by ts_rank_cd with the weights title (A) 1.0, key terms
// (B) 0.5 and body (D) 0.1, as search/fts weighs its columns 10, 5 and 1,
// normalized by the logarithm of the document's length; Hit.Score is the
// rank (higher is better), and hits of equal score come in id order.
// Every match is ranked, through the GIN index; snippets are made only
// for the hits returned.
//
// Hit.Snippet shows the column (title, body or key terms) that matches
// the most terms, the first of them on a tie, as search/fts's does: at
// most 16 words around the match, each matched word between [MarkStart]
// and [MarkEnd] (« and »), and [Ellipsis] (…) where words were left out.
// ts_headline marks the words in the column's searchable form, and the
// text as written is put back in its place, so the snippet shows the
// text's own case, accents and punctuation. Of a column longer than
// 10,000 characters ts_headline reads a window around the first word
// that begins with one of the query's stems (it takes about a second
// for 2 MB of text). The markers are not escaped: a document's own « or
// » looks the same.
//
// # Differences
//
// PostgreSQL sets limits that SQLite's FTS5 does not, declared in the
// conformance suite's Features:
//
//   - Text holds neither NUL bytes nor invalid UTF-8: Put refuses a
//     document with either, naming it and the field, with
//     search.ErrInvalid (the service already refuses such text as poison).
//   - A tsvector holds at most 1 MB of lexemes and positions. A body
//     whose distinct words would exceed that (some hundreds of thousands
//     of them) is stored whole but indexed only up to the word where it
//     would: its later words are not found.
//   - A tsvector keeps word positions up to 16,383, and 256 positions of
//     a lexeme: a phrase is found only within a body's first 16,383
//     words, and among the first 256 occurrences of its words; its words
//     alone are found anywhere.
//   - A word of more than 2,047 bytes is not indexed.
//   - Stemming is Snowball's English, not FTS5's Porter: the two agree
//     on most words (connections, connected and connection are one), not
//     all.
//
// # Connections and concurrency
//
// An Index runs on the caller's pgx pool and keeps no connection of its
// own; Close leaves the pool open. Put writes its documents with one
// INSERT … ON CONFLICT DO UPDATE of unnested arrays, so that a batch is
// one statement and one transaction; Delete is one DELETE. Writers and
// readers on any number of processes run at once, as PostgreSQL's MVCC
// allows. An Index is safe for concurrent use.
package pgsearch
