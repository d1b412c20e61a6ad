package search_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/weirhq/weir/ingest/search"
)

func TestParseQuery(t *testing.T) {
	t.Parallel()
	w := func(s string) search.Term { return search.Term{Text: s} }
	p := func(s string) search.Term { return search.Term{Text: s, Phrase: true} }
	for _, tc := range []struct {
		query string
		want  []search.Term
	}{
		{`deploy`, []search.Term{w("deploy")}},
		{`  deploy   failed `, []search.Term{w("deploy"), w("failed")}},
		{`"deploy failed"`, []search.Term{p("deploy failed")}},
		{`" deploy failed "`, []search.Term{p("deploy failed")}},
		{`"deploy failed`, []search.Term{p("deploy failed")}},
		{`conn*`, []search.Term{{Text: "conn", Prefix: true}}},
		{`conn***`, []search.Term{{Text: "conn", Prefix: true}}},
		{`"tls hand"*`, []search.Term{{Text: "tls hand", Phrase: true, Prefix: true}}},
		{`"tls hand" *`, []search.Term{p("tls hand")}},
		{`"tls hand*"`, []search.Term{p("tls hand*")}},
		{`a"b c"d`, []search.Term{w("a"), p("b c"), w("d")}},
		{`a*b`, []search.Term{w("a*b")}},
		{`OR AND NOT NEAR(x)`, []search.Term{w("OR"), w("AND"), w("NOT"), w("NEAR(x)")}},
		{`title:x -y +z ^w`, []search.Term{w("title:x"), w("-y"), w("+z"), w("^w")}},
		{`* ** "" "  " () !!! "*"* x`, []search.Term{w("x")}},
		{`* ()`, nil},
		{"a\x00b\tc\xffd", []search.Term{w("a"), w("b"), w("c"), w("d")}},
		{`café 日本語`, []search.Term{w("café"), w("日本語")}},
		{`😀 x`, []search.Term{w("x")}},
	} {
		got, err := search.ParseQuery(tc.query)
		if err != nil {
			t.Errorf("ParseQuery(%q): %v", tc.query, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ParseQuery(%q) = %+v, want %+v", tc.query, got, tc.want)
		}
	}
}

func TestParseQueryRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ query, reason string }{
		{"", "empty"},
		{" \t\r\n", "empty"},
		{"\x00\x7f\xff", "empty"},
		{strings.Repeat("x", search.MaxQueryBytes+1), "bytes long"},
		{strings.Repeat("x ", search.MaxQueryTerms+1), "more than"},
	} {
		_, err := search.ParseQuery(tc.query)
		var qe *search.QueryError
		if !errors.As(err, &qe) || !errors.Is(err, search.ErrInvalid) {
			t.Errorf("ParseQuery(%.20q): %v, want a QueryError wrapping ErrInvalid", tc.query, err)
			continue
		}
		if !strings.Contains(qe.Reason, tc.reason) || qe.Query != tc.query {
			t.Errorf("ParseQuery(%.20q): %+v, want the query and a reason with %q", tc.query, qe, tc.reason)
		}
		if !utf8.ValidString(err.Error()) || len(err.Error()) > 200 {
			t.Errorf("error message %q: want short valid UTF-8", err)
		}
	}
	// Exactly at the limits is fine.
	if _, err := search.ParseQuery(strings.Repeat("x ", search.MaxQueryTerms)); err != nil {
		t.Errorf("%d terms: %v", search.MaxQueryTerms, err)
	}
	if _, err := search.ParseQuery(strings.Repeat("x", search.MaxQueryBytes)); err != nil {
		t.Errorf("%d bytes: %v", search.MaxQueryBytes, err)
	}
}

func TestDocValidate(t *testing.T) {
	t.Parallel()
	if err := (search.Doc{}).Validate(); !errors.Is(err, search.ErrInvalid) {
		t.Errorf("empty id: %v, want ErrInvalid", err)
	}
	if err := (search.Doc{ID: "x"}).Validate(); err != nil {
		t.Errorf("id only: %v", err)
	}
}

func TestCheckLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want int }{{1, 1}, {50, 50}, {search.MaxLimit, search.MaxLimit}, {search.MaxLimit + 1, search.MaxLimit}} {
		if got, err := search.CheckLimit(tc.in); got != tc.want || err != nil {
			t.Errorf("CheckLimit(%d) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []int{0, -5} {
		if _, err := search.CheckLimit(in); !errors.Is(err, search.ErrInvalid) {
			t.Errorf("CheckLimit(%d): %v, want ErrInvalid", in, err)
		}
	}
}

// FuzzParseQuery checks the terms' invariants: never empty, no quote, no
// control character, a letter or digit in each, at most MaxQueryTerms;
// and that only an empty or oversized query is refused.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{``, `a`, `"a b"*`, `"`, `*`, `a"b`, "\x00", `NEAR(a b)`, `title:x`, `日本 "語`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		terms, err := search.ParseQuery(q)
		if err != nil {
			var qe *search.QueryError
			if !errors.As(err, &qe) || !errors.Is(err, search.ErrInvalid) {
				t.Fatalf("ParseQuery(%q): %v is not a QueryError", q, err)
			}
			return
		}
		if len(terms) > search.MaxQueryTerms {
			t.Fatalf("%d terms", len(terms))
		}
		for _, term := range terms {
			if term.Text == "" || strings.Contains(term.Text, `"`) || strings.ContainsFunc(term.Text, func(r rune) bool { return r < ' ' || r == 0x7f }) {
				t.Fatalf("ParseQuery(%q): bad term %+v", q, term)
			}
			if !utf8.ValidString(term.Text) {
				t.Fatalf("ParseQuery(%q): term %+v is not valid UTF-8", q, term)
			}
		}
	})
}
