package pgsearch

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/weirhq/weir/ingest/search"
)

func TestFold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"Hello, World!", "hello  world "},
		{"alice@example.com", "alice example com"},
		{"/var/log/syslog", " var log syslog"},
		{"v2.5.1 and 3.14", "v2 5 1 and 3 14"},
		{"foo-bar_baz", "foo bar baz"},
		{"Café RÉSUMÉ naïve", "cafe resume naive"},
		{"re\u0301sume\u0301 x", "resume   x"}, // combining accents: the word padded at its end
		{"\u0301x", " x"},                      // a mark outside a word is a space
		{"Søren Łódź Đorđe Ǿ", "soren lodz dorde o"},
		{"ΟΔΟΣ οδος Ελληνικά", "οδοσ οδοσ ελληνικα"},
		{"Straße ǅ ﬁ", "straße ǆ ﬁ"},
		{"日本語のテキスト", "日本語のテキスト"},
		{"한국어", "한국어"},                      // Hangul syllables are not accented letters
		{"नमस्ते", "नमस्ते"},                // an Indic script's marks are kept
		{"a😀b\x00c\td\ue000e", "a b c d e"}, // symbols, controls and private use are spaces
		{"caf\xe9 x", "caf  x"},             // invalid UTF-8 is a space
		{"'quoted' \\back\\", " quoted   back "},
	} {
		got := fold(tc.in)
		if got != tc.want {
			t.Errorf("fold(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if utf8.ValidString(tc.in) && utf8.RuneCountInString(got) != utf8.RuneCountInString(tc.in) {
			t.Errorf("fold(%q) = %q: %d runes for %d", tc.in, got, utf8.RuneCountInString(got), utf8.RuneCountInString(tc.in))
		}
	}
}

// FuzzFold checks fold's invariants: one rune for each rune of valid
// UTF-8, only letters, digits, marks and spaces, nothing a quoted tsquery
// operand gives a meaning to, and a fixed point.
func FuzzFold(f *testing.F) {
	for _, s := range []string{"Café", "re\u0301sume\u0301", "a'b\\c", "ΟΔΟΣ", "ǅ", "\u0345", "ᾳ", "İ", "\U0001D400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := fold(s)
		if utf8.ValidString(s) && utf8.RuneCountInString(got) != utf8.RuneCountInString(s) {
			t.Fatalf("fold(%q) = %q: %d runes for %d", s, got, utf8.RuneCountInString(got), utf8.RuneCountInString(s))
		}
		for _, r := range got {
			if r != ' ' && !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r) {
				t.Fatalf("fold(%q) = %q holds %U", s, got, r)
			}
		}
		if again := fold(got); again != got {
			t.Fatalf("fold(fold(%q)) = %q, not %q", s, again, got)
		}
	})
}

func TestCompile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query        string
		all, anyTerm string
		each         []string
		words        string
	}{
		{`a b`, `('a') & ('b')`, `('a') | ('b')`, []string{`'a'`, `'b'`}, "a b"},
		{`"quick brown" fox*`, `('quick' <-> 'brown') & ('fox':*)`, `('quick' <-> 'brown') | ('fox':*)`,
			[]string{`'quick' <-> 'brown'`, `'fox':*`}, "quick brown fox"},
		{`"tls hand"*`, `('tls' <-> 'hand':*)`, `('tls' <-> 'hand':*)`, []string{`'tls' <-> 'hand':*`}, "tls hand"},
		{`foo-bar title:X`, `('foo' <-> 'bar') & ('title' <-> 'x')`, `('foo' <-> 'bar') | ('title' <-> 'x')`,
			[]string{`'foo' <-> 'bar'`, `'title' <-> 'x'`}, "foo bar title x"},
		{`O'Reilly & !x | (y) <-> z:*`, `('o' <-> 'reilly') & ('x') & ('y') & ('z':*)`, `('o' <-> 'reilly') | ('x') | ('y') | ('z':*)`,
			[]string{`'o' <-> 'reilly'`, `'x'`, `'y'`, `'z':*`}, "o reilly x y z"},
		{`CAFÉ`, `('cafe')`, `('cafe')`, []string{`'cafe'`}, "cafe"},
	} {
		terms, err := search.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		q, ok := compile(terms)
		if !ok || q.all != tc.all || q.anyTerm != tc.anyTerm || strings.Join(q.each, "|") != strings.Join(tc.each, "|") || q.words != tc.words {
			t.Errorf("compile(%q) = %+v, %v;\nwant all %s, any %s, each %q, words %q", tc.query, q, ok, tc.all, tc.anyTerm, tc.each, tc.words)
		}
	}
	// Terms that can match nothing: the whole query matches nothing.
	for _, text := range []string{"\ue000", strings.Repeat("x", maxWordBytes+1)} {
		if q, ok := compile([]search.Term{{Text: "fine"}, {Text: text}}); ok {
			t.Errorf("compile of a term %.20q = %+v, want not ok", text, q)
		}
	}
	if _, ok := compile([]search.Term{{Text: strings.Repeat("x", maxWordBytes)}}); !ok {
		t.Errorf("a word of %d bytes: not ok", maxWordBytes)
	}
	// A term holding a quote or a backslash (not one ParseQuery makes,
	// and not one fold keeps) would still be one operand.
	if got := quoteOperand.Replace(`a'b\c`); got != `a''b\\c` {
		t.Errorf("quoteOperand = %s", got)
	}
}

func TestIndexedPrefixes(t *testing.T) {
	t.Parallel()
	small := [3]string{"a title", "key  terms", "a body of words, café"}
	if got := indexedPrefixes(small, vocabularyBudget); got != [3]int32{7, 10, 21} {
		t.Errorf("a small document: %v, want every rune", got)
	}
	// 150,000 distinct words of 8 bytes: about 2.7 MB by the estimate.
	words := make([]string, 150_000)
	for i := range words {
		words[i] = fmt.Sprintf("w%07d", i)
	}
	body := strings.Join(words, " ")
	got := indexedPrefixes([3]string{"title", "", body}, vocabularyBudget)
	if got[0] != 5 || got[1] != 0 {
		t.Errorf("title and terms: %v, want them whole", got)
	}
	n := int(got[2])
	if n <= 0 || n >= len(body) || body[n-1] != ' ' {
		t.Fatalf("body: %d runes of %d, want a prefix that ends between words", n, len(body))
	}
	indexed := len(strings.Fields(body[:n]))
	if est := indexed * (8 + 8 + 2); est > vocabularyBudget || est < vocabularyBudget*9/10 {
		t.Errorf("%d words indexed (estimate %d bytes): want close to the budget of %d", indexed, est, vocabularyBudget)
	}
	// Repeated words cost their positions only, up to 256 of them.
	repeated := strings.Repeat("same word ", 400_000)
	if got := indexedPrefixes([3]string{"", "", repeated}, vocabularyBudget); int(got[2]) != len(repeated) {
		t.Errorf("800,000 occurrences of 2 words: %d runes of %d, want all", got[2], len(repeated))
	}
	// A budget smaller than the title cuts the title, and leaves the rest.
	if got := indexedPrefixes([3]string{"one two three", "four", "five"}, 2*(3+10)+1); got != [3]int32{8, 0, 0} {
		t.Errorf("a tiny budget: %v, want the title's first two words only", got)
	}
}

func TestSnippet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    headline
		want string
	}{
		{"the whole text", headline{marked: "«disk» full on the primary", at: 1, text: "Disk full on the primary", total: 24},
			"«Disk» full on the primary"},
		{"trailing punctuation kept", headline{marked: "planning  and the «disk» budget", at: 1, text: "Planning, and the disk budget.", total: 30},
			"Planning, and the «disk» budget."},
		{"leading punctuation kept", headline{marked: "quoted «word»", at: 3, before: "« ", text: "quoted word »", total: 15},
			"« quoted «word» »"},
		{"words left out", headline{marked: "c «d» e", at: 5, before: "a b ", text: "c d e f", total: 11},
			"…c «d» e…"},
		{"before longer than what was read", headline{marked: "«x»", at: 100, before: strings.Repeat(" ", 64), text: "x", total: 100},
			"…«x»"},
		{"combining accents", headline{marked: "«resume»   x", at: 1, text: "re\u0301sume\u0301 x", total: 10},
			"«re\u0301sume\u0301» x"},
		{"combining accents, marked last", headline{marked: "a «resume»", at: 1, text: "a re\u0301sume\u0301.", total: 11},
			"a «re\u0301sume\u0301»."},
		{"not found", headline{marked: "«x» y", at: 0}, "«x» y"},
	} {
		if got := snippet(tc.h); got != tc.want {
			t.Errorf("%s: snippet = %q, want %q", tc.name, got, tc.want)
		}
	}
}
