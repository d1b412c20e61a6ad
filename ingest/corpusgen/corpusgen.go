// Package corpusgen writes the sample corpus that ships in the repository's
// corpus/ directory: about three hundred short plain-text and Markdown
// documents on eight themes (a few in French and German), two mailing-list
// archives in mboxrd format, and four poison files ingestion must
// refuse.
//
// The text is built from sentence templates and word banks written into
// this package, so nothing is downloaded, and the output is a function of
// the seed alone: the same seed gives byte-identical files on every machine
// and Go version (the generator uses its own SplitMix64, not math/rand). A
// test regenerates the corpus and compares it with the committed one byte
// for byte, so the two cannot drift apart. To change the corpus, change
// this package and regenerate:
//
//	go run ./ingest/corpusgen/cmd/corpusgen -out corpus
package corpusgen

//go:generate go run ./cmd/corpusgen -out ../../corpus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultSeed is the seed of the committed corpus.
const DefaultSeed uint64 = 1

// ManifestName is the file, at the corpus root, that holds the Manifest as
// JSON. It is not itself listed in the manifest.
const ManifestName = "MANIFEST.json"

// Kind is what a corpus file is.
type Kind string

// The kinds of file.
const (
	KindText     Kind = "text"     // a .txt document
	KindMarkdown Kind = "markdown" // a .md document
	KindMbox     Kind = "mbox"     // an mboxrd archive, one document per message
	KindPoison   Kind = "poison"   // a file ingestion must refuse
)

// File is one file of the corpus.
type File struct {
	// Path is relative to the corpus root, with forward slashes.
	Path  string `json:"path"`
	Kind  Kind   `json:"kind"`
	Bytes int    `json:"bytes"`
	// Title is a document's title (its first line, or its "# " heading),
	// or an archive's list name.
	Title string `json:"title,omitempty"`
	// Theme is the subject, such as "astronomy"; Lang is "en", "fr" or "de".
	Theme string `json:"theme,omitempty"`
	Lang  string `json:"lang,omitempty"`
	// Words counts the whitespace-separated tokens that hold a letter.
	Words int `json:"words,omitempty"`
	// Messages is an archive's message count, MessageIDs their Message-ID
	// headers in order.
	Messages   int      `json:"messages,omitempty"`
	MessageIDs []string `json:"message_ids,omitempty"`
	// Rule is the rule a poison file breaks (RuleNUL, RuleControl or
	// RuleNoWords), Reason says how.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Totals counts the corpus.
type Totals struct {
	Files        int `json:"files"`
	Text         int `json:"text"`
	Markdown     int `json:"markdown"`
	Mbox         int `json:"mbox"`
	MboxMessages int `json:"mbox_messages"`
	Poison       int `json:"poison"`
	// Documents is how many documents ingestion should produce and index:
	// one per text and Markdown file (README.md included) and one per
	// archived message. Poison files produce none.
	Documents int `json:"documents"`
	// Bytes is the size of the listed files; MANIFEST.json is not counted.
	Bytes int `json:"bytes"`
}

// Manifest describes a generated corpus: every file but MANIFEST.json
// itself, sorted by path, and the totals.
type Manifest struct {
	Seed   uint64 `json:"seed"`
	Files  []File `json:"files"`
	Totals Totals `json:"totals"`
}

// Generate writes the corpus for seed into dir, creating dir and its
// subdirectories as needed and overwriting files of the same names, and
// returns its manifest, which it also writes to dir/MANIFEST.json. Files
// already in dir that the corpus does not have are left alone (see Extra).
func Generate(dir string, seed uint64) (Manifest, error) {
	if dir == "" {
		return Manifest{}, errors.New("corpusgen: no output directory")
	}
	docs, err := build(seed)
	if err != nil {
		return Manifest{}, err
	}
	m := manifestOf(seed, docs)
	js, err := encodeManifest(m)
	if err != nil {
		return Manifest{}, err
	}
	for _, d := range docs {
		if err := writeFile(dir, d.Path, d.data); err != nil {
			return Manifest{}, err
		}
	}
	if err := writeFile(dir, ManifestName, js); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Extra lists, sorted, the files under dir that the corpus described by m
// does not have: left over from an older corpus, or put there by hand.
func Extra(dir string, m Manifest) ([]string, error) {
	want := map[string]bool{ManifestName: true}
	for _, f := range m.Files {
		want[f.Path] = true
	}
	var extra []string
	err := walkFiles(dir, func(rel, _ string) error {
		if !want[rel] {
			extra = append(extra, rel)
		}
		return nil
	})
	return extra, err
}

// walkFiles calls fn with the path of each file under dir, relative to dir
// with forward slashes, and its path.
func walkFiles(dir string, fn func(rel, path string) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), p)
	})
}

// build makes every file of the corpus in memory, sorted by path.
func build(seed uint64) ([]doc, error) {
	g := &generator{s: seed, titles: map[string]bool{}, paths: map[string]bool{}}
	docs, err := g.singleDocs()
	if err != nil {
		return nil, err
	}
	for _, l := range lists {
		d, err := g.mbox(l)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	docs = append(docs, g.poison()...)
	docs = append(docs, readme(seed, docs))
	slices.SortFunc(docs, func(a, b doc) int { return strings.Compare(a.Path, b.Path) })
	return docs, nil
}

func manifestOf(seed uint64, docs []doc) Manifest {
	m := Manifest{Seed: seed, Files: make([]File, 0, len(docs))}
	for _, d := range docs {
		f := d.File
		f.Bytes = len(d.data)
		m.Files = append(m.Files, f)
	}
	m.Totals = totalsOf(m.Files)
	return m
}

func totalsOf(files []File) Totals {
	var t Totals
	for _, f := range files {
		t.Files++
		t.Bytes += f.Bytes
		switch f.Kind {
		case KindText:
			t.Text++
		case KindMarkdown:
			t.Markdown++
		case KindMbox:
			t.Mbox++
			t.MboxMessages += f.Messages
		case KindPoison:
			t.Poison++
		}
	}
	t.Documents = t.Text + t.Markdown + t.MboxMessages
	return t
}

func encodeManifest(m Manifest) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("corpusgen: manifest: %w", err)
	}
	return b.Bytes(), nil
}

func writeFile(dir, rel string, data []byte) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("corpusgen: %w", err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("corpusgen: %w", err)
	}
	return nil
}

// generator holds the random stream and what has been handed out so far.
type generator struct {
	s      uint64          // SplitMix64 state
	titles map[string]bool // titles in use
	paths  map[string]bool // paths in use
}

// next is SplitMix64: fixed here so that the corpus never depends on the
// Go version's random number generators.
func (g *generator) next() uint64 {
	g.s += 0x9e3779b97f4a7c15
	z := g.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn is in [0, n); the modulo bias is immaterial here.
func (g *generator) intn(n int) int { return int(g.next() % uint64(n)) }

func (g *generator) pick(xs []string) string { return xs[g.intn(len(xs))] }

// shuffle is Fisher–Yates.
func (g *generator) shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, g.intn(i+1))
	}
}

// sample is k distinct elements of xs in random order.
func sample[T any](g *generator, xs []T, k int) []T {
	c := append([]T(nil), xs...)
	g.shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c[:min(k, len(c))]
}

// countWords counts the whitespace-separated tokens of s that hold a letter.
func countWords(s string) int {
	n := 0
	for _, f := range strings.Fields(s) {
		if strings.IndexFunc(f, unicode.IsLetter) >= 0 {
			n++
		}
	}
	return n
}

// wrap breaks s into lines of at most width runes, at spaces, but never
// inside a Markdown link's text.
func wrap(s string, width int) string {
	var b strings.Builder
	col := 0
	for _, w := range strings.Fields(protectLinks(s)) {
		w = strings.ReplaceAll(w, "\x00", " ")
		n := utf8.RuneCountInString(w)
		switch {
		case col == 0:
		case col+1+n > width:
			b.WriteByte('\n')
			col = 0
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += n
	}
	return b.String()
}

// protectLinks turns the spaces inside square brackets into NULs.
func protectLinks(s string) string {
	if !strings.Contains(s, "[") {
		return s
	}
	b := []byte(s)
	depth := 0
	for i, c := range b {
		switch {
		case c == '[':
			depth++
		case c == ']' && depth > 0:
			depth--
		case c == ' ' && depth > 0:
			b[i] = 0
		}
	}
	return string(b)
}

// capitalise upper-cases the first letter of s, which may follow
// punctuation such as a link's "[".
func capitalise(s string) string {
	i := strings.IndexFunc(s, unicode.IsLetter)
	if i < 0 {
		return s
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return s[:i] + string(unicode.ToUpper(r)) + s[i+n:]
}

// slug makes a file name from a title: lower case ASCII letters and digits
// joined by hyphens, at most about 60 characters.
func slug(title string) string {
	fold := strings.NewReplacer("ä", "ae", "ö", "oe", "ü", "ue", "ß", "ss", "é", "e", "è", "e", "ê", "e", "à", "a",
		"â", "a", "ç", "c", "î", "i", "ô", "o", "û", "u", "ù", "u", "ë", "e", "ï", "i", "œ", "oe", "'", "", "’", "")
	s := fold.Replace(strings.ToLower(title))
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	out := b.String()
	for len(out) > 60 {
		i := strings.LastIndexByte(out, '-')
		if i < 0 {
			out = out[:60]
			break
		}
		out = out[:i]
	}
	return out
}

// searchWords are the README's examples: a word, and what it should find.
var searchWords = []struct{ Word, Finds string }{
	{"telescope", "astronomy"},
	{"spinnaker", "sailing"},
	{"hive", "beekeeping"},
	{"sourdough", "bread baking"},
	{"locomotive", "railway history"},
	{"compost", "gardening"},
	{"gambit", "chess"},
	{"barometer", "weather watching"},
	{"télescope", "astronomy, in French"},
	{"levain", "bread baking, in French"},
	{"Dampflok", "railway history, in German"},
	{"Bienenstock", "beekeeping, in German"},
}

// tokens is the set of lower-cased words of s.
func tokens(s string) map[string]bool {
	t := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		t[w] = true
	}
	return t
}

// readme is corpus/README.md, written from the other files so that its
// numbers are always right.
func readme(seed uint64, docs []doc) doc {
	files := make([]File, 0, len(docs)+1)
	for _, d := range docs {
		f := d.File
		f.Bytes = len(d.data)
		files = append(files, f)
	}
	t := totalsOf(files)
	langs := map[string]int{}
	for _, f := range files {
		if f.Kind == KindText || f.Kind == KindMarkdown {
			langs[f.Lang]++
		}
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	para := func(format string, args ...any) {
		b.WriteString(wrap(fmt.Sprintf(format, args...), wrapWidth) + "\n\n")
	}
	var names []string
	for _, th := range themes {
		names = append(names, strings.ToLower(th.Name))
	}

	p("# The weir sample corpus\n\n")
	para("A small collection of made-up documents for trying weir in the first minute: ingest it, then search it. From the repository root:")
	p("```sh\nweir ingest corpus/\n```\n\n")
	para("Everything here is synthetic. The prose was generated from sentence templates and word banks written for this purpose " +
		"(public domain, nothing downloaded); the people, clubs, places and addresses are invented, and every address and link " +
		"is under example.org, example.com or a similar reserved domain.")

	p("## What is in it\n\n")
	p("| kind | files | documents |\n|---|---:|---:|\n")
	p("| plain text (`.txt`) | %d | %d |\n", t.Text, t.Text)
	p("| Markdown (`.md`), this README included | %d | %d |\n", t.Markdown+1, t.Markdown+1)
	p("| mailing-list archives (`.mbox`) | %d | %d messages |\n", t.Mbox, t.MboxMessages)
	p("| poison (must be refused) | %d | 0 |\n", t.Poison)
	p("| **total** | **%d** | **%d expected to succeed** |\n\n", t.Files+1, t.Documents+1)
	p("- `notes/`: plain-text notes.\n")
	p("- `articles/`: Markdown articles with headings, lists, emphasis and links.\n")
	p("- `recipes/`: bread baking, as plain-text notes and Markdown recipes.\n")
	p("- `lists/`: two mailing-list archives, one document per message.\n")
	p("- `poison/`: files ingestion must refuse, one per rule.\n\n")
	para("The documents are on eight themes: %s. Each is %d to %d words long; %d are in French and %d in German, "+
		"the rest in English. The files other than this README and MANIFEST.json come to %d bytes.",
		strings.Join(names, ", "), minWords, maxWords, langs["fr"], langs["de"], t.Bytes)

	p("## Searching it\n\n")
	para("Each theme has its own key words, found in its documents and in no others. A few to try, with the number of " +
		"documents and of archived messages that contain the word (this README aside):")
	p("| word | theme | documents | messages |\n|---|---|---:|---:|\n")
	toks := make([]map[string]bool, len(docs))
	for i, d := range docs {
		toks[i] = tokens(string(d.data))
	}
	for _, sw := range searchWords {
		w := strings.ToLower(sw.Word)
		nd, nm := 0, 0
		for i, d := range docs {
			switch d.Kind {
			case KindText, KindMarkdown:
				if toks[i][w] {
					nd++
				}
			case KindMbox:
				for _, txt := range d.messageText {
					if tokens(txt)[w] {
						nm++
					}
				}
			}
		}
		p("| `%s` | %s | %d | %d |\n", sw.Word, sw.Finds, nd, nm)
	}
	p("\n")

	p("## The mailing lists\n\n")
	for _, d := range docs {
		if d.Kind == KindMbox {
			p("- `%s`: %s, %d messages.\n", d.Path, d.Title, d.Messages)
		}
	}
	p("\n")
	para("Both are in mboxrd format: each message starts with a `From ` line, and a body line that begins with `From ` " +
		"(after any number of `>`) has one more `>` in the file. Messages have From, To, Subject, Date (RFC 5322), " +
		"Message-ID and Content-Type headers; replies have `Re:` subjects, In-Reply-To and References. In each archive " +
		"three bodies are quoted-printable, one is base64 and one is multipart/alternative (plain text and HTML); " +
		"one sender's name is an RFC 2047 encoded word.")

	p("## Poison files\n\n")
	para("The parser refuses binary data (a NUL byte, or more than one control character in twenty; text in another " +
		"encoding than UTF-8 is read as Windows-1252), and the extractor text with no words at all. " +
		"Each of these files breaks one of those rules, and none should become a searchable document:")
	p("| file | rule | why |\n|---|---|---|\n")
	for _, d := range docs {
		if d.Kind == KindPoison {
			p("| `%s` | %s | %s |\n", d.Path, d.Rule, d.Reason)
		}
	}
	p("\n")

	p("## How it was made\n\n")
	para("The Go package `ingest/corpusgen` wrote the corpus from seed %d. To regenerate it, from the repository root:", seed)
	p("```sh\ngo run ./ingest/corpusgen/cmd/corpusgen -out corpus\n```\n\n")
	para("(or `go generate ./ingest/corpusgen`). The same seed always gives the same bytes, and the package's tests " +
		"regenerate the corpus and compare it with these files byte for byte, so edit the generator, never the files.")
	b.WriteString(wrap(fmt.Sprintf("`%s` lists every file (this README included, itself excepted) with its kind, title, "+
		"theme, language and word count, each archive's message count and Message-IDs, each poison file's rule, and the totals.",
		ManifestName), wrapWidth) + "\n")

	text := b.String()
	return doc{
		File: File{Path: "README.md", Kind: KindMarkdown, Title: "The weir sample corpus", Lang: "en", Words: countWords(text)},
		data: []byte(text),
	}
}
