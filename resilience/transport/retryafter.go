package transport

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// ErrBadRetryAfter is wrapped by the error ParseRetryAfter returns for a
// value it cannot read.
var ErrBadRetryAfter = errors.New("invalid retry-after value")

// MaxRetryAfter is the longest duration ParseRetryAfter returns: the largest
// whole number of seconds a time.Duration holds (about 292 years). Larger
// values saturate to it.
const MaxRetryAfter = time.Duration(math.MaxInt64/int64(time.Second)) * time.Second

const maxRetryAfterSeconds = int64(MaxRetryAfter / time.Second)

// ParseRetryAfter reads the value of a Retry-After header (RFC 9110, section
// 10.2.3) and returns how long to wait from now. It accepts both forms:
//
//   - delta-seconds, a non-negative decimal integer such as "120"; a value
//     larger than MaxRetryAfter saturates to it;
//   - an HTTP-date in any form http.ParseTime reads (IMF-fixdate, RFC 850,
//     asctime); a date at or before now gives 0, a date past
//     now+MaxRetryAfter gives MaxRetryAfter.
//
// Surrounding whitespace is ignored. Anything else, including an empty
// value, a sign or a fraction, is an error that names the value and wraps
// ErrBadRetryAfter. The duration is never negative.
func ParseRetryAfter(value string, now time.Time) (time.Duration, error) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, badRetryAfter(value, "empty")
	}
	switch c := v[0]; {
	case c >= '0' && c <= '9':
		d, ok := parseSeconds(v)
		if !ok {
			return 0, badRetryAfter(value, "not a whole number of seconds")
		}
		return d, nil
	case c == '-' || c == '+':
		return 0, badRetryAfter(value, "signed")
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, badRetryAfter(value, "neither delta-seconds nor an HTTP-date")
	}
	d := t.Sub(now) // saturates rather than overflows
	return min(max(d, 0), MaxRetryAfter), nil
}

// parseSeconds reads a string of ASCII digits as seconds, saturating at
// MaxRetryAfter.
func parseSeconds(s string) (time.Duration, bool) {
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= maxRetryAfterSeconds { // once past the max, stay past it
			n = n*10 + int64(c-'0')
		}
	}
	if n > maxRetryAfterSeconds {
		return MaxRetryAfter, true
	}
	return time.Duration(n) * time.Second, true
}

func badRetryAfter(value, why string) error {
	const maxShown = 64
	if len(value) > maxShown {
		value = value[:maxShown] + "…"
	}
	return fmt.Errorf("transport: parse retry-after %q: %s: %w", value, why, ErrBadRetryAfter)
}
