package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

var (
	// ErrNotFound: no document has the id.
	ErrNotFound = errors.New("search: not found")
	// ErrInvalid: a parameter is out of range (an empty id, a limit below
	// one, an empty query); the error names it.
	ErrInvalid = errors.New("search: invalid parameter")
)

// MaxLimit is the most hits or entries one call returns: a larger limit
// passed to Search or Entries is reduced to it.
const MaxLimit = 1000

// Doc is a document of the index.
type Doc struct {
	// ID is the document's id (a hex SHA-256, say). Required. Ids are
	// compared, and Entries ordered, byte by byte, as Go compares strings.
	ID string
	// Title is indexed, and weighs more than Body in the ranking.
	Title string
	// Body is the text to index.
	Body string
	// Summary is a lead summary, stored and shown in hits, not indexed.
	Summary string
	// Source is where the document came from, e.g. "incoming/notes/a.txt"
	// or "lists/dev.mbox#12"; stored, not indexed.
	Source string
	// Language is the document's language (e.g. "en"); stored, not
	// indexed.
	Language string
	// Terms are the document's key terms, indexed, and weighing more than
	// Body and less than Title in the ranking. Get returns an empty Terms
	// as nil.
	Terms []string
	// UpdatedAt is the source row's updated time, kept to the microsecond
	// and compared by reconciliation. Zero is allowed and kept as zero.
	UpdatedAt time.Time
}

// Validate returns an error wrapping ErrInvalid when d cannot be stored:
// its ID is empty, or its UpdatedAt lies outside the range of int64
// microseconds since the Unix epoch (about ±292,000 years).
func (d Doc) Validate() error {
	if d.ID == "" {
		return fmt.Errorf("%w: document id is empty", ErrInvalid)
	}
	if d.UpdatedAt.Before(minTime) || d.UpdatedAt.After(maxTime) {
		return fmt.Errorf("%w: document %q: updated at %v is out of range", ErrInvalid, d.ID, d.UpdatedAt)
	}
	return nil
}

var (
	minTime = time.UnixMicro(math.MinInt64).UTC()
	maxTime = time.UnixMicro(math.MaxInt64).UTC()
)

// Hit is a document a search found.
type Hit struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Source  string `json:"source"`
	Summary string `json:"summary"`
	// Snippet is an extract of the text around the match, the matched
	// words marked by the backend (search/fts: «word», with … where text
	// was left out).
	Snippet string `json:"snippet"`
	// Score is the hit's relevance: higher is better. Scores compare only
	// hits of one search.
	Score     float64   `json:"score"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Entry is a document's id and updated time, as reconciliation reads them.
type Entry struct {
	ID        string    `json:"id"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Index is a full-text index of documents. Implementations are safe for
// concurrent use.
type Index interface {
	// Put inserts the documents, replacing those with the same ids, all in
	// one transaction: either all are stored or none. Every document is
	// validated first (Doc.Validate): an invalid one fails the call with
	// ErrInvalid, storing nothing. When docs repeats an id, the last wins.
	Put(ctx context.Context, docs ...Doc) error
	// Delete removes the documents with the ids, in one transaction, and
	// returns how many there were. Ids not in the index are ignored.
	Delete(ctx context.Context, ids ...string) (int, error)
	// Get returns the document with the id, or an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, id string) (Doc, error)
	// Search returns up to limit documents matching query (see the package
	// documentation for its syntax), best first. It fails with ErrInvalid
	// (a *QueryError for the query) for an empty query or a limit below
	// one; a limit above MaxLimit is reduced to it. A query whose words
	// are all ignored returns no hits and no error.
	Search(ctx context.Context, query string, limit int) ([]Hit, error)
	// Entries returns up to limit entries whose ids are greater than
	// after, in id order: pass "" for the first page and the last id of a
	// page for the next. ErrInvalid for a limit below one; a limit above
	// MaxLimit is reduced to it.
	Entries(ctx context.Context, after string, limit int) ([]Entry, error)
	// Count returns how many documents the index holds.
	Count(ctx context.Context) (int, error)
	// Close releases the index. It is safe to call more than once; other
	// calls fail after it.
	Close() error
}

// CheckLimit returns limit reduced to MaxLimit, or an error wrapping
// ErrInvalid when it is below one. Backends call it in Search and Entries.
func CheckLimit(limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("%w: limit %d is below 1", ErrInvalid, limit)
	}
	return min(limit, MaxLimit), nil
}
