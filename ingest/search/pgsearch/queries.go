package pgsearch

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// rankWeights are ts_rank_cd's weights of the labels D, C, B and A: the
// body (D) counts 0.1, the key terms (B) 0.5 and the title (A) 1, so
// that a match in the title counts ten times one in the body, and a key
// term five times, as in search/fts. C is not used.
const rankWeights = `'{0.1, 0.2, 0.5, 1.0}'::float4[]`

// rankNormalization is ts_rank_cd's normalization: 1 divides the rank by
// the logarithm of the document's length, so that a long document does
// not win by its length alone.
const rankNormalization = "1"

// headlineOptions are ts_headline's: one fragment of at most 16 words
// (as search/fts's snippets), at least 15 when the text has them, short
// words kept at its ends, and fts's markers.
const headlineOptions = `'MaxFragments=1, MaxWords=16, MinWords=15, ShortWord=0, StartSel=` + MarkStart + `, StopSel=` + MarkEnd + `'`

// headlineAllOptions are ts_headline's for a text shown whole.
const headlineAllOptions = `'HighlightAll=true, StartSel=` + MarkStart + `, StopSel=` + MarkEnd + `'`

// headlineWindow is the most runes of a text that ts_headline reads.
const headlineWindow = 10_000

// queries are the index's statements, naming its schema.
type queries struct {
	docs, meta    string // the tables' qualified names
	drop, create  string
	put, del, get string
	find, entries string
	count         string
}

func newQueries(schema string) queries {
	ident := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	docs, meta, stem := ident("weir_search_docs"), ident("weir_search_meta"), ident("weir_search_stem")
	config := ident("weir_search")
	// The configuration is named by a constant, a string literal cast to
	// regconfig, which PostgreSQL resolves once when it parses the
	// statement.
	cfg := "'" + strings.ReplaceAll(config, "'", "''") + "'::regconfig"
	r := strings.NewReplacer(
		"{docs}", docs, "{meta}", meta, "{stem}", stem, "{config}", config, "{cfg}", cfg,
		"{weights}", rankWeights, "{norm}", rankNormalization, "{options}", headlineOptions,
		"{options_all}", headlineAllOptions,
		"{context}", strconv.Itoa(snippetContext), "{window}", strconv.Itoa(headlineWindow))
	return queries{
		docs: docs,
		meta: meta,
		drop: r.Replace(`
DROP TABLE IF EXISTS {docs};
DROP TABLE IF EXISTS {meta};
DROP TEXT SEARCH CONFIGURATION IF EXISTS {config};
DROP TEXT SEARCH DICTIONARY IF EXISTS {stem};`),
		create:  r.Replace(createSQL),
		put:     r.Replace(putSQL),
		del:     r.Replace(`DELETE FROM {docs} WHERE id = ANY ($1::text[])`),
		get:     r.Replace(`SELECT title, body, terms, summary, source, language, updated_at FROM {docs} WHERE id = $1`),
		find:    r.Replace(searchSQL),
		entries: r.Replace(`SELECT id, updated_at FROM {docs} WHERE id > $1 ORDER BY id LIMIT $2`),
		count:   r.Replace(`SELECT count(*) FROM {docs}`),
	}
}

// createSQL is the index's layout at SchemaVersion (see doc.go).
const createSQL = `
-- English stems (Snowball), with no stop words: every word is indexed,
-- so that "the fox" is a phrase of two words, and "and" a word.
CREATE TEXT SEARCH DICTIONARY {stem} (TEMPLATE = pg_catalog.snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION {config} (COPY = pg_catalog.english);
ALTER TEXT SEARCH CONFIGURATION {config} ALTER MAPPING REPLACE pg_catalog.english_stem WITH {stem};

CREATE TABLE {docs} (
	id         text COLLATE "C" PRIMARY KEY, -- byte order, as Go compares strings
	title      text NOT NULL,
	body       text NOT NULL,
	terms      jsonb NOT NULL,               -- the key terms, as Get returns them
	terms_text text NOT NULL,                -- the key terms joined by ", ": shown in snippets
	summary    text NOT NULL,
	source     text NOT NULL,
	language   text NOT NULL,
	updated_at bigint,                       -- microseconds since the Unix epoch, UTC; NULL for the zero time
	-- The searchable forms (fold) of title, terms_text and body: what
	-- tsv indexes and ts_headline reads.
	title_f    text NOT NULL,
	terms_f    text NOT NULL,
	body_f     text NOT NULL,
	-- title weighs A, the key terms B, the body D.
	tsv        tsvector NOT NULL
);
CREATE INDEX ON {docs} USING gin (tsv);
-- Keep tsv in the row (compressed if it can be), and move the texts out
-- to TOAST first: a search that matches many documents ranks every
-- match, and reading each tsv from TOAST made it 2-3 times slower.
ALTER TABLE {docs} ALTER COLUMN tsv SET STORAGE MAIN;

CREATE TABLE {meta} (
	version integer NOT NULL
);`

// putSQL stores a batch of documents, given as parallel arrays (no id
// twice). The tsvector of each is made here, of the first runes of each
// searchable form that fit (indexedPrefixes). A document written again
// replaces the old row: the update is a HOT one, leaving the GIN index
// alone, when its words are unchanged.
const putSQL = `
INSERT INTO {docs} AS d (id, title, body, terms, terms_text, summary, source, language, updated_at,
	title_f, terms_f, body_f, tsv)
SELECT u.id, u.title, u.body, u.terms::jsonb, u.terms_text, u.summary, u.source, u.language, u.updated_at,
	u.title_f, u.terms_f, u.body_f,
	setweight(to_tsvector({cfg}, left(u.title_f, u.title_n)), 'A') ||
	setweight(to_tsvector({cfg}, left(u.terms_f, u.terms_n)), 'B') ||
	setweight(to_tsvector({cfg}, left(u.body_f, u.body_n)), 'D')
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
	$9::bigint[], $10::text[], $11::text[], $12::text[], $13::int[], $14::int[], $15::int[])
	AS u(id, title, body, terms, terms_text, summary, source, language, updated_at,
		title_f, terms_f, body_f, title_n, terms_n, body_n)
ON CONFLICT (id) DO UPDATE SET title = excluded.title, body = excluded.body, terms = excluded.terms,
	terms_text = excluded.terms_text, summary = excluded.summary, source = excluded.source,
	language = excluded.language, updated_at = excluded.updated_at, title_f = excluded.title_f,
	terms_f = excluded.terms_f, body_f = excluded.body_f, tsv = excluded.tsv`

// searchSQL finds the best $2 documents matching the tsquery text $1
// (every term ANDed), and writes their snippets. $3 holds each term's
// tsquery alone, $4 the terms ORed, and $5 the words of the terms.
//
// top ranks every match (through the GIN index) and keeps the best; the
// snippets are made only for those. A term that holds no lexeme (a word
// PostgreSQL does not index) would drop out of $1 and widen the match:
// then nothing matches. The snippet shows the column, of the title, the
// body and the key terms, that matches the most terms (the first of
// them on a tie), as search/fts's does: ts_headline marks the terms in
// its searchable form, and the text as written around that place is
// returned to be put in its stead (snippet).
const searchSQL = `
WITH top AS (
	SELECT d.id, ts_rank_cd({weights}, d.tsv, to_tsquery({cfg}, $1), {norm}) AS score
	FROM {docs} AS d
	WHERE d.tsv @@ to_tsquery({cfg}, $1)
		AND NOT EXISTS (SELECT 1 FROM unnest($3::text[]) AS t(q) WHERE numnode(to_tsquery({cfg}, t.q)) = 0)
	ORDER BY score DESC, d.id
	LIMIT $2
)
SELECT d.id, d.title, d.source, d.summary, d.updated_at, top.score,
	h.marked, f.at, substr(c.text, f.at, f.len + {context}),
	substr(c.text, greatest(f.at - {context}, 1), least(f.at - 1, {context})), char_length(c.text)
FROM top
JOIN {docs} AS d ON d.id = top.id
CROSS JOIN LATERAL (
	SELECT count(*) FILTER (WHERE l.title @@ t.q) AS title,
		count(*) FILTER (WHERE l.body @@ t.q) AS body,
		count(*) FILTER (WHERE l.terms @@ t.q) AS terms
	FROM (SELECT ts_filter(d.tsv, '{a}') AS title, ts_filter(d.tsv, '{d}') AS body,
			ts_filter(d.tsv, '{b}') AS terms OFFSET 0) AS l,
		(SELECT to_tsquery({cfg}, q) FROM unnest($3::text[]) AS u(q)) AS t(q)
) AS m
CROSS JOIN LATERAL (
	SELECT CASE WHEN m.title >= m.body AND m.title >= m.terms THEN d.title
		WHEN m.body >= m.terms THEN d.body ELSE d.terms_text END AS text,
		CASE WHEN m.title >= m.body AND m.title >= m.terms THEN d.title_f
		WHEN m.body >= m.terms THEN d.body_f ELSE d.terms_f END AS folded
	OFFSET 0
) AS c
-- OFFSET 0 keeps each subquery apart: pulled up into the outer query,
-- its expression would be computed again wherever a column of it is
-- used, and ts_headline reads all it is given.
--
-- A text longer than {window} runes is given to ts_headline as a window
-- of that many, around the first word that begins with a lexeme of the
-- query ($5 holds its words): ts_headline takes about a second for 2 MB.
CROSS JOIN LATERAL (
	SELECT CASE WHEN char_length(c.folded) <= {window} THEN 1
		ELSE greatest(1, coalesce((
			SELECT min(nullif(strpos(' ' || c.folded, ' ' || l), 0))
			FROM unnest(tsvector_to_array(to_tsvector({cfg}, $5))) AS l), 1) - {window} / 2)
		END AS start
	OFFSET 0
) AS w
-- A text of at most 16 words is shown whole (ts_headline would take a
-- fragment of it around the match).
CROSS JOIN LATERAL (
	SELECT ts_headline({cfg}, substr(c.folded, w.start, {window}), to_tsquery({cfg}, $4),
		CASE WHEN char_length(c.folded) <= 1000
			AND array_length(regexp_split_to_array(btrim(c.folded), ' +'), 1) <= 16
		THEN {options_all} ELSE {options} END) AS marked
	OFFSET 0
) AS h
CROSS JOIN LATERAL (
	SELECT nullif(strpos(substr(c.folded, w.start, {window}), p.plain), 0) + w.start - 1 AS at,
		char_length(p.plain) AS len
	FROM (SELECT replace(replace(h.marked, '` + MarkStart + `', ''), '` + MarkEnd + `', '') AS plain) AS p
	OFFSET 0
) AS f
ORDER BY top.score DESC, d.id`
