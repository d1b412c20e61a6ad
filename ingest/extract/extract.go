package extract

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/weirhq/weir/resilience/retry"
)

// Input is a document to extract from.
type Input struct {
	// ID and Source identify the document; extractors do not read them.
	ID, Source string
	// Title is the document's own title, "" if it has none.
	Title string
	// Text is the document's text.
	Text string
	// Meta is the parser's metadata; extractors do not read it.
	Meta map[string]string
}

// Result is what an extractor derives from an Input.
type Result struct {
	// Title is Input.Title if set, else a title derived from the text.
	Title string
	// Language is an ISO 639-1 code, or "und" when unsure.
	Language string
	// WordCount is the number of words of the text, always computed
	// locally.
	WordCount int
	// KeyTerms are up to 10 lower-case terms, the most relevant first.
	KeyTerms []string
	// Summary is a short summary of the text.
	Summary string
	// Extractor names the extractor: "local" or "llm:<model>".
	Extractor string
}

// Extractor derives a Result from an Input.
type Extractor interface {
	Extract(ctx context.Context, in Input) (Result, error)
}

// Limits of a Result.
const (
	// MaxTitleRunes is the longest title derived from the text.
	MaxTitleRunes = 120
	// MaxSummaryRunes is the longest summary Local writes.
	MaxSummaryRunes = 300
	// MaxKeyTerms is the most key terms in a Result.
	MaxKeyTerms = 10
	// Undetermined is the Language when it cannot be told.
	Undetermined = "und"
)

// ErrNotText is matched by the error for poison input: text that contains a
// NUL byte, is not valid UTF-8, or has no words. The error is marked
// permanent for the retry package: retrying cannot help.
var ErrNotText = errors.New("input is not text")

// NotTextError is the error for poison input. It matches ErrNotText.
// Extractors return it wrapped with retry.Permanent.
type NotTextError struct {
	// Reason says what is wrong: "contains a NUL byte at offset 12", "is
	// not valid UTF-8 at offset 3" or "has no words".
	Reason string
}

func (e *NotTextError) Error() string {
	return "extract: " + ErrNotText.Error() + ": the text " + e.Reason
}

// Unwrap returns ErrNotText.
func (e *NotTextError) Unwrap() error { return ErrNotText }

// checkText returns a permanent *NotTextError for poison text.
func checkText(text string) error {
	if i := strings.IndexByte(text, 0); i >= 0 {
		return notText("contains a NUL byte at offset %d", i)
	}
	if !utf8.ValidString(text) {
		return notText("is not valid UTF-8 at offset %d", invalidAt(text))
	}
	for range words(text) {
		return nil
	}
	return notText("has no words")
}

func notText(format string, args ...any) error {
	return retry.Permanent(&NotTextError{Reason: fmt.Sprintf(format, args...)})
}

func invalidAt(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
