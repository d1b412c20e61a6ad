package transport_test

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/resilience/transport"
)

var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"0", 0},
		{"7", 7 * time.Second},
		{"120", 2 * time.Minute},
		{"007", 7 * time.Second},
		{"  30\t", 30 * time.Second},
		{"86400", 24 * time.Hour},
		{"9223372036", transport.MaxRetryAfter},
		{"9223372037", transport.MaxRetryAfter},
		{"99999999999999999999999999999999", transport.MaxRetryAfter},
		// IMF-fixdate, RFC 850 and asctime.
		{t0.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"Wednesday, 21-Jan-26 15:31:00 GMT", time.Minute},
		{"Wed Jan 21 15:30:05 2026", 5 * time.Second},
		{" " + t0.Add(time.Hour).Format(http.TimeFormat) + " ", time.Hour},
		// A date now or in the past means now.
		{t0.Format(http.TimeFormat), 0},
		{t0.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0},
		// A date beyond what a Duration holds saturates.
		{"Fri, 31 Dec 9999 23:59:59 GMT", transport.MaxRetryAfter},
	} {
		got, err := transport.ParseRetryAfter(tc.value, t0)
		if err != nil || got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, nil", tc.value, got, err, tc.want)
		}
	}
}

func TestParseRetryAfterRejects(t *testing.T) {
	for _, value := range []string{
		"", "   ", "-1", "+5", "1.5", "1e3", "0x10", "5s", "5 6", "soon",
		"١٢",                        // Arabic-Indic digits are not delta-seconds
		"Wed, 21 Jan 2026 15:30:00", // no zone
		"2026-01-21T15:30:00Z",      // RFC 3339 is not an HTTP-date
		"Wed, 21 Jan 2026 15:30:00 GMT garbage",
		strings.Repeat("x", 1000),
	} {
		d, err := transport.ParseRetryAfter(value, t0)
		if err == nil {
			t.Errorf("ParseRetryAfter(%q) = %v, nil; want an error", value, d)
			continue
		}
		if !errors.Is(err, transport.ErrBadRetryAfter) {
			t.Errorf("ParseRetryAfter(%q) error %v does not wrap ErrBadRetryAfter", value, err)
		}
		if d != 0 {
			t.Errorf("ParseRetryAfter(%q) returned %v with its error", value, d)
		}
		if len(value) <= 64 && !strings.Contains(err.Error(), strconv.Quote(value)) {
			t.Errorf("error %q does not name the value %q", err, value)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"0", "7", "120", " 30 ", "007", "9223372036", "9223372037",
		"99999999999999999999999999",
		"Wed, 21 Oct 2015 07:28:00 GMT",
		"Wednesday, 21-Oct-15 07:28:00 GMT",
		"Wed Oct 21 07:28:00 2015",
		"Fri, 31 Dec 9999 23:59:59 GMT",
		"", "-1", "+5", "1.5", "abc", "\x00", "0x1f", "١",
	} {
		f.Add(s, uint64(len(s)))
	}
	f.Add("", uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, s string, n uint64) {
		d, err := transport.ParseRetryAfter(s, t0)
		switch {
		case d < 0:
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", s, d)
		case d > transport.MaxRetryAfter:
			t.Fatalf("ParseRetryAfter(%q) = %v, above MaxRetryAfter", s, d)
		case err != nil && !errors.Is(err, transport.ErrBadRetryAfter):
			t.Fatalf("ParseRetryAfter(%q) error %v does not wrap ErrBadRetryAfter", s, err)
		}

		// Any non-negative integer, as strconv writes it, reads back as
		// that many seconds, saturating at MaxRetryAfter.
		want := transport.MaxRetryAfter
		if n <= uint64(transport.MaxRetryAfter/time.Second) {
			want = time.Duration(n) * time.Second
		}
		v := strconv.FormatUint(n, 10)
		if got, err := transport.ParseRetryAfter(v, t0); err != nil || got != want {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v", v, got, err, want)
		}
	})
}
