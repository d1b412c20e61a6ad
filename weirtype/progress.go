package weirtype

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of what a running attempt records with its job.
const (
	// MaxProgressMessage is the longest Progress.Message, in bytes.
	MaxProgressMessage = 256
	// MaxOutput is the largest output of a success, in bytes of JSON as
	// the worker gave it.
	MaxOutput = 64 << 10
)

// Progress is how far a running attempt says it has got.
type Progress struct {
	// Percent is between 0 and 100.
	Percent float64 `json:"percent"`
	// Message says what the attempt is doing, in at most
	// MaxProgressMessage bytes of UTF-8. Empty for none.
	Message string `json:"message,omitempty"`
	// Attempt is the attempt that recorded it: a progress from an
	// earlier attempt than the job's current one is stale.
	Attempt int `json:"attempt"`
	// At is when it was recorded.
	At time.Time `json:"at"`
}

// Validate returns an error wrapping ErrInvalid that names the bad field:
// a Percent that is not a number between 0 and 100, or a Message longer
// than MaxProgressMessage bytes, not valid UTF-8 or holding a NUL byte
// (which PostgreSQL cannot store). A longer message is refused rather
// than cut, so that what is shown is what the worker wrote.
func (p Progress) Validate() error {
	switch {
	case math.IsNaN(p.Percent) || p.Percent < 0 || p.Percent > 100:
		return Invalidf("progress percent %v is not between 0 and 100", p.Percent)
	case len(p.Message) > MaxProgressMessage:
		return Invalidf("progress message is %d bytes, more than the %d allowed", len(p.Message), MaxProgressMessage)
	case !utf8.ValidString(p.Message) || strings.IndexByte(p.Message, 0) >= 0:
		return Invalidf("progress message is not valid UTF-8 text (or holds a NUL byte)")
	}
	return nil
}

// CheckOutput returns an error wrapping ErrInvalid that names the bad
// output: one larger than MaxOutput bytes, or not a JSON value. An empty
// output (none) is valid.
func CheckOutput(output json.RawMessage) error {
	switch {
	case len(output) == 0:
		return nil
	case len(output) > MaxOutput:
		return Invalidf("output is %d bytes of JSON, more than the %d allowed", len(output), MaxOutput)
	case !json.Valid(output):
		return Invalidf("output is not valid JSON")
	case bytes.Contains(output, []byte(`\u0000`)):
		return Invalidf("output holds a NUL character (\\u0000), which PostgreSQL cannot store")
	}
	return nil
}
