package extract_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/resilience/retry"
)

const english = `Session notes: reservoir monitoring

The reservoir levels dropped again this week. Engineers from the water board inspected the reservoir gates on Monday, and they found that two of the gates were leaking. The board will replace the gates before the rainy season. Monitoring of the reservoir continues every day.`

const french = `Le conseil municipal a décidé de rénover la bibliothèque du quartier. Les travaux commenceront au printemps et la bibliothèque restera ouverte pendant une partie des travaux. Les habitants sont invités à donner leur avis sur le projet lors d'une réunion publique.`

const german = `Die Stadt hat beschlossen, die alte Brücke über den Fluss zu erneuern. Die Arbeiten beginnen im Frühjahr und sollen bis zum Ende des Jahres dauern. Während der Bauzeit ist die Brücke für den Verkehr gesperrt.`

const spanish = `El ayuntamiento ha aprobado un nuevo plan para el transporte público de la ciudad. Los autobuses tendrán más frecuencia por la mañana y por la tarde, y el precio del billete no cambiará durante este año.`

func extractLocal(t *testing.T, in extract.Input) extract.Result {
	t.Helper()
	r, err := extract.NewLocal().Extract(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLocalLanguage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, want string
	}{
		{"english", english, "en"},
		{"french", french, "fr"},
		{"german", german, "de"},
		{"spanish", spanish, "es"},
		{"italian", "Il comune ha deciso di chiudere la strada per i lavori. La strada sarà aperta di nuovo alla fine del mese, quando i lavori saranno finiti.", "it"},
		{"dutch", "De gemeente heeft besloten dat de brug niet meer open gaat. Het verkeer moet voor een jaar om de stad heen rijden.", "nl"},
		{"portuguese", "A prefeitura anunciou que o parque vai abrir mais cedo. Os moradores estão felizes com a mudança e pedem mais bancos no parque.", "pt"},
		{"too short", "Reservoir gates", "und"},
		{"numbers", "4 8 15 16 23 42", "und"},
		{"identifiers", "kubectl apply deployment yaml namespace staging rollout", "und"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := extractLocal(t, extract.Input{Text: tt.text}).Language; got != tt.want {
				t.Errorf("Language = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLocalKeyTerms(t *testing.T) {
	t.Parallel()
	r := extractLocal(t, extract.Input{Text: english})
	// reservoir 4, gates 3, monitoring and board 2 (monitoring first seen
	// first), then words seen once in order; "again" is a stop word.
	want := []string{"reservoir", "gates", "monitoring", "board", "session", "notes", "levels", "dropped", "week", "engineers"}
	if !slices.Equal(r.KeyTerms, want) {
		t.Errorf("KeyTerms = %q, want %q", r.KeyTerms, want)
	}
	fr := extractLocal(t, extract.Input{Text: french})
	if fr.KeyTerms[0] != "bibliothèque" || fr.KeyTerms[1] != "travaux" {
		t.Errorf("French KeyTerms = %q, want bibliothèque and travaux first", fr.KeyTerms)
	}
	for _, rr := range []extract.Result{r, fr} {
		for _, term := range rr.KeyTerms {
			switch term {
			case "the", "of", "and", "they", "will", "le", "la", "les", "de", "des", "et", "d", "l", "une":
				t.Errorf("stop word %q in key terms %q", term, rr.KeyTerms)
			}
			if term != strings.ToLower(term) {
				t.Errorf("key term %q is not lower case", term)
			}
		}
	}
	// Ties are broken by first appearance; possessives and elisions fold.
	r = extractLocal(t, extract.Input{Text: "Zebra apple. The zebra's apple! L'mango, mango"})
	if want := []string{"zebra", "apple", "mango"}; !slices.Equal(r.KeyTerms, want) {
		t.Errorf("KeyTerms = %q, want %q", r.KeyTerms, want)
	}
}

func TestLocalTitle(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 40) // 200 runes
	tests := []struct {
		name string
		in   extract.Input
		want string
	}{
		{"input title wins", extract.Input{Title: "  Given  ", Text: "First line\nsecond"}, "Given"},
		{"first non-empty line", extract.Input{Text: "\n\n   Hello   there  \nnext"}, "Hello there"},
		{"cut on a word", extract.Input{Text: long}, strings.TrimSpace(strings.Repeat("word ", 24))},
		{"hard cut without spaces", extract.Input{Text: strings.Repeat("é", 130)}, strings.Repeat("é", 120)},
	}
	for _, tt := range tests {
		got := extractLocal(t, tt.in).Title
		if got != tt.want {
			t.Errorf("%s: Title = %q, want %q", tt.name, got, tt.want)
		}
		if utf8.RuneCountInString(got) > extract.MaxTitleRunes {
			t.Errorf("%s: title has %d runes", tt.name, utf8.RuneCountInString(got))
		}
	}
}

func TestLocalSummary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, title, text, want string
	}{
		{
			name: "whole sentences that fit, title paragraph skipped",
			text: english,
			want: strings.Join(strings.Fields(english[strings.Index(english, "The reservoir"):]), " "),
		},
		{
			name: "stops before the sentence that does not fit",
			text: sentence(100) + " " + sentence(100) + "\n\n" + sentence(100),
			want: sentence(100) + " " + sentence(100),
		},
		{
			name: "fills up to the limit exactly",
			text: sentence(150) + " " + sentence(149) + " Next.",
			want: sentence(150) + " " + sentence(149),
		},
		{
			name: "abbreviation is not a boundary",
			text: "Use e.g. a fake clock. Then test.",
			want: "Use e.g. a fake clock. Then test.",
		},
		{
			name: "one sentence longer than the limit is cut on a word",
			text: strings.Repeat("alpha beta ", 40) + "end.",
			want: strings.TrimSpace(strings.Repeat("alpha beta ", 27)) + "…",
		},
		{
			name: "a sentence line that is also the title is kept",
			text: "Only one sentence here.",
			want: "Only one sentence here.",
		},
	}
	for _, tt := range tests {
		got := extractLocal(t, extract.Input{Title: tt.title, Text: tt.text}).Summary
		if got != tt.want {
			t.Errorf("%s: Summary =\n%q\nwant\n%q", tt.name, got, tt.want)
		}
		if n := utf8.RuneCountInString(got); n > extract.MaxSummaryRunes {
			t.Errorf("%s: summary has %d runes", tt.name, n)
		}
	}
}

func TestLocalResult(t *testing.T) {
	t.Parallel()
	r := extractLocal(t, extract.Input{Text: "Don't panic: state-of-the-art l'homme, 42 times."})
	if r.WordCount != 6 || r.Extractor != "local" {
		t.Errorf("WordCount %d Extractor %q, want 6 and local", r.WordCount, r.Extractor)
	}
}

// sentence returns a sentence of n runes (n >= 2): "Xxxx xxxx… x."
func sentence(n int) string {
	b := []byte(strings.Repeat("xxxx ", n)[:n-1])
	b[0] = 'X'
	if b[n-2] == ' ' {
		b[n-2] = 'x'
	}
	return string(b) + "."
}

func TestPoisonInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, reason string
	}{
		{"nul byte", "hello\x00world", "NUL byte at offset 5"},
		{"invalid utf-8", "caf\xe9 au lait", "not valid UTF-8 at offset 3"},
		{"empty", "", "has no words"},
		{"blank", " \n\t ", "has no words"},
		{"only punctuation", "... --- !!! ??? «» — * # ' -", "has no words"},
		{"only symbols", "→ ★ ✓ 😀", "has no words"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := extract.NewLocal().Extract(context.Background(), extract.Input{Text: tt.text})
			if !errors.Is(err, extract.ErrNotText) {
				t.Fatalf("err = %v, want ErrNotText", err)
			}
			if !retry.IsPermanent(err) {
				t.Errorf("err %v is not permanent", err)
			}
			nt, ok := errors.AsType[*extract.NotTextError](err)
			if !ok || !strings.Contains(nt.Reason, tt.reason) {
				t.Errorf("err = %v, want a NotTextError saying %q", err, tt.reason)
			}
			// A retry policy gives up at once.
			p := retry.MustNew(retry.Config{MaxAttempts: 5})
			calls := 0
			perr := p.Do(context.Background(), func(ctx context.Context) error {
				calls++
				_, err := extract.NewLocal().Extract(ctx, extract.Input{Text: tt.text})
				return err
			})
			if re, ok := errors.AsType[*retry.Error](perr); !ok || re.Reason != retry.ReasonNonRetryable || calls != 1 {
				t.Errorf("retry policy: %v after %d calls, want non_retryable after 1", perr, calls)
			}
		})
	}
}

func TestLocalHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := extract.NewLocal().Extract(ctx, extract.Input{Text: "words"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func FuzzLocal(f *testing.F) {
	for _, s := range []string{english, french, "", "\x00", "a\xffb", "Title\n\nBody. More.", strings.Repeat("x", 400), "l'a d' 's '"} {
		f.Add("", s)
	}
	f.Add("T", "text")
	f.Fuzz(func(t *testing.T, title, text string) {
		r, err := extract.NewLocal().Extract(context.Background(), extract.Input{Title: title, Text: text})
		if err != nil {
			if !errors.Is(err, extract.ErrNotText) || !retry.IsPermanent(err) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if r.WordCount < 1 || r.Language == "" || len(r.KeyTerms) > extract.MaxKeyTerms || r.Extractor != "local" {
			t.Fatalf("bad result %+v", r)
		}
		if n := utf8.RuneCountInString(r.Summary); n > extract.MaxSummaryRunes {
			t.Fatalf("summary of %d runes", n)
		}
		if strings.TrimSpace(title) == "" && utf8.RuneCountInString(r.Title) > extract.MaxTitleRunes {
			t.Fatalf("title of %d runes", utf8.RuneCountInString(r.Title))
		}
		seen := map[string]bool{}
		for _, k := range r.KeyTerms {
			if seen[k] || k != strings.ToLower(k) {
				t.Fatalf("key terms %q: duplicate or not lower case", r.KeyTerms)
			}
			seen[k] = true
		}
	})
}
