package corpusgen

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// committed is the corpus directory of the repository, relative to this
// package.
const committed = "../../corpus"

// TestCommittedCorpus regenerates the corpus and compares it with the
// committed one byte for byte: same files, same contents.
func TestCommittedCorpus(t *testing.T) {
	dir := t.TempDir()
	m, err := Generate(dir, DefaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	want := readTree(t, dir)
	got := readTree(t, committed)
	const fix = "; regenerate it with: go run ./ingest/corpusgen/cmd/corpusgen -out corpus"
	var problems []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			problems = append(problems, "missing from corpus/: "+p)
		case !bytes.Equal(g, w):
			problems = append(problems, "differs from the generator's output: "+p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			problems = append(problems, "not made by the generator: "+p)
		}
	}
	slices.Sort(problems)
	if len(problems) > 10 {
		problems = append(problems[:10], "…")
	}
	if len(problems) > 0 {
		t.Fatalf("corpus/ does not match the generator (seed %d)%s:\n\t%s", DefaultSeed, fix, strings.Join(problems, "\n\t"))
	}
	if len(want) != len(m.Files)+1 {
		t.Errorf("%d files written, manifest lists %d (plus %s)", len(want), len(m.Files), ManifestName)
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := walkFiles(dir, func(rel, p string) error {
		b, err := os.ReadFile(p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestDeterministic(t *testing.T) {
	a, err := build(7)
	if err != nil {
		t.Fatal(err)
	}
	b, err := build(7)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("seed 7: %d files, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Path != b[i].Path || !bytes.Equal(a[i].data, b[i].data) {
			t.Fatalf("seed 7 twice: %s and %s differ", a[i].Path, b[i].Path)
		}
	}
	c, err := build(8)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i := range min(len(a), len(c)) {
		if a[i].Path == c[i].Path && bytes.Equal(a[i].data, c[i].data) {
			same++
		}
	}
	if same > 10 { // the poison files and little else
		t.Errorf("seeds 7 and 8 give %d identical files", same)
	}
}

// corpus is the default corpus, built once in memory.
func corpus(t *testing.T) ([]doc, Manifest) {
	t.Helper()
	docs, err := build(DefaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	return docs, manifestOf(DefaultSeed, docs)
}

func TestManifest(t *testing.T) {
	docs, m := corpus(t)
	tot := m.Totals
	if tot.Text != numText || tot.Markdown != numMarkdown+1 || tot.Mbox != 2 || tot.Poison != 4 {
		t.Errorf("totals %+v: want %d text, %d markdown (README included), 2 mbox, 4 poison", tot, numText, numMarkdown+1)
	}
	if tot.Documents != tot.Text+tot.Markdown+tot.MboxMessages || tot.Files != len(docs) {
		t.Errorf("totals %+v do not add up over %d files", tot, len(docs))
	}
	if tot.Bytes > 1_500_000 {
		t.Errorf("corpus is %d bytes, want under 1.5 MB", tot.Bytes)
	}
	js, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Manifest
	if err := json.Unmarshal(js, &back); err != nil || back.Totals != m.Totals || len(back.Files) != len(m.Files) {
		t.Errorf("manifest does not survive JSON: %v", err)
	}
	if !slices.IsSortedFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) }) {
		t.Error("manifest files are not sorted by path")
	}

	titles := map[string]string{}
	langs := map[string]int{}
	for i, d := range docs {
		f := m.Files[i]
		if f.Bytes != len(d.data) || f.Path != d.Path {
			t.Errorf("%s: manifest says %d bytes, file has %d", f.Path, f.Bytes, len(d.data))
		}
		if f.Kind != KindPoison && bytes.Contains(d.data, []byte("\r")) {
			t.Errorf("%s: has a carriage return; want LF line ends", f.Path)
		}
		if f.Kind != KindText && f.Kind != KindMarkdown {
			continue
		}
		text := string(d.data)
		if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			t.Errorf("%s: not clean UTF-8", f.Path)
		}
		if !strings.HasSuffix(text, "\n") || strings.HasSuffix(text, "\n\n") {
			t.Errorf("%s: want exactly one newline at the end", f.Path)
		}
		if f.Path == "README.md" {
			continue
		}
		langs[f.Lang]++
		if f.Words != countWords(text) || f.Words < minWords || f.Words > maxWords {
			t.Errorf("%s: %d words (manifest %d), want %d to %d", f.Path, countWords(text), f.Words, minWords, maxWords)
		}
		if other, ok := titles[f.Title]; ok {
			t.Errorf("%s and %s share the title %q", f.Path, other, f.Title)
		}
		titles[f.Title] = f.Path
		first, _, _ := strings.Cut(text, "\n")
		switch f.Kind {
		case KindText:
			if !strings.HasSuffix(f.Path, ".txt") || first != f.Title {
				t.Errorf("%s: first line %q, want the title %q", f.Path, first, f.Title)
			}
		case KindMarkdown:
			if !strings.HasSuffix(f.Path, ".md") || first != "# "+f.Title {
				t.Errorf("%s: first line %q, want # %s", f.Path, first, f.Title)
			}
			for _, want := range []string{"\n## ", "\n- ", "*"} {
				if !strings.Contains(text, want) {
					t.Errorf("%s: no %q", f.Path, want)
				}
			}
			if f.Lang == "en" && !strings.Contains(text, "](https://example.org/") {
				t.Errorf("%s: no link", f.Path)
			}
		}
	}
	if langs["fr"] < 3 || langs["de"] < 3 || langs["en"] < 250 {
		t.Errorf("languages %v: want a few French and German documents, the rest English", langs)
	}
}

// TestSearchWords checks that a theme's key word finds that theme's
// documents and no others, which is what makes the corpus worth searching.
func TestSearchWords(t *testing.T) {
	docs, _ := corpus(t)
	for _, c := range []struct {
		word, theme string
		min         int
	}{
		{"telescope", "astronomy", 20}, {"spinnaker", "sailing", 5}, {"hive", "beekeeping", 10},
		{"sourdough", "bread", 15}, {"locomotive", "railways", 10}, {"compost", "gardening", 10},
		{"gambit", "chess", 5}, {"barometer", "weather", 10},
		{"télescope", "astronomy", 1}, {"levain", "bread", 1}, {"dampflok", "railways", 1}, {"bienenstock", "beekeeping", 1},
	} {
		n := 0
		for _, d := range docs {
			if (d.Kind != KindText && d.Kind != KindMarkdown) || d.Path == "README.md" || !tokens(string(d.data))[c.word] {
				continue
			}
			n++
			if d.Theme != c.theme {
				t.Errorf("%q is in %s, a %s document; want only %s", c.word, d.Path, d.Theme, c.theme)
			}
		}
		if n < c.min {
			t.Errorf("%q is in %d documents, want at least %d", c.word, n, c.min)
		}
	}
}

func TestMbox(t *testing.T) {
	docs, _ := corpus(t)
	n := 0
	for _, d := range docs {
		if d.Kind != KindMbox {
			continue
		}
		n++
		checkMbox(t, d)
	}
	if n != 2 {
		t.Errorf("%d archives, want 2", n)
	}
}

// checkMbox reads an archive the mboxrd way and checks every message.
func checkMbox(t *testing.T, d doc) {
	t.Helper()
	data := string(d.data)
	if !utf8.ValidString(data) || !strings.HasPrefix(data, "From ") {
		t.Fatalf("%s: not UTF-8 starting with a From_ line", d.Path)
	}
	if !strings.Contains(data, "\n>From ") || !strings.Contains(data, "\n>>From ") {
		t.Errorf("%s: want quoted >From and >>From lines", d.Path)
	}
	var raws []string
	for line := range strings.Lines(data) {
		if strings.HasPrefix(line, "From ") {
			raws = append(raws, "")
			continue // the From_ line is the envelope
		}
		if q := strings.TrimLeft(line, ">"); len(q) < len(line) && strings.HasPrefix(q, "From ") {
			line = line[1:]
		}
		raws[len(raws)-1] += line
	}
	if len(raws) != d.Messages || len(raws) < 20 || len(raws) > 40 {
		t.Errorf("%s: %d messages, manifest says %d; want 20 to 40", d.Path, len(raws), d.Messages)
	}
	for i := range raws {
		raws[i] = strings.TrimSuffix(raws[i], "\n") // the blank line before the next From_ line
	}
	seen := map[string]bool{}
	encodings := map[string]int{}
	replies, fromLines := 0, 0
	for i, raw := range raws {
		msg, err := mail.ReadMessage(strings.NewReader(raw))
		if err != nil {
			t.Errorf("%s #%d: %v", d.Path, i+1, err)
			continue
		}
		h := msg.Header
		for _, k := range []string{"From", "To", "Subject", "Date", "Message-Id", "Content-Type", "Mime-Version"} {
			if h.Get(k) == "" {
				t.Errorf("%s #%d: no %s header", d.Path, i+1, k)
			}
		}
		if _, err := mail.ParseDate(h.Get("Date")); err != nil {
			t.Errorf("%s #%d: Date: %v", d.Path, i+1, err)
		}
		if _, err := (&mime.WordDecoder{}).DecodeHeader(h.Get("From")); err != nil {
			t.Errorf("%s #%d: From: %v", d.Path, i+1, err)
		}
		id := h.Get("Message-Id")
		if i >= len(d.MessageIDs) || id != d.MessageIDs[i] || seen[id] {
			t.Errorf("%s #%d: Message-ID %s not the manifest's, or repeated", d.Path, i+1, id)
		}
		seen[id] = true
		if parent := h.Get("In-Reply-To"); parent != "" {
			replies++
			if !seen[parent] || !strings.HasPrefix(h.Get("Subject"), "Re: ") || !strings.Contains(h.Get("References"), parent) {
				t.Errorf("%s #%d: a reply to %s, not an earlier message, or without Re: and References", d.Path, i+1, parent)
			}
		}
		text := bodyText(t, d.Path, i+1, h, msg.Body, encodings)
		if !utf8.ValidString(text) || countWords(text) < 20 {
			t.Errorf("%s #%d: body is not UTF-8 text of 20 words or more: %q", d.Path, i+1, text)
		}
		if text != d.messageText[i]+"\n" {
			t.Errorf("%s #%d: body decodes to\n%q\nwant\n%q", d.Path, i+1, text, d.messageText[i]+"\n")
		}
		for line := range strings.Lines(text) {
			if strings.HasPrefix(line, "From ") {
				fromLines++
			}
		}
	}
	if replies < 10 || replies == len(raws) {
		t.Errorf("%s: %d replies of %d messages", d.Path, replies, len(raws))
	}
	if fromLines < 2 {
		t.Errorf("%s: %d body lines begin with \"From \", want a few", d.Path, fromLines)
	}
	if encodings["quoted-printable"] < 3 || encodings["base64"] != 1 || encodings["multipart/alternative"] != 1 {
		t.Errorf("%s: encodings %v, want 3 quoted-printable, 1 base64, 1 multipart/alternative", d.Path, encodings)
	}
}

// bodyText decodes a message body to its plain text.
func bodyText(t *testing.T, path string, n int, h interface{ Get(string) string }, body io.Reader, encodings map[string]int) string {
	t.Helper()
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		t.Errorf("%s #%d: Content-Type: %v", path, n, err)
		return ""
	}
	if mt == "multipart/alternative" {
		encodings[mt]++
		r := multipart.NewReader(body, params["boundary"])
		var plain string
		for {
			p, err := r.NextRawPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("%s #%d: multipart: %v", path, n, err)
				return ""
			}
			b, _ := io.ReadAll(p)
			if strings.HasPrefix(p.Header.Get("Content-Type"), "text/plain") {
				plain = string(b)
			}
		}
		return plain
	}
	if mt != "text/plain" || params["charset"] != "utf-8" {
		t.Errorf("%s #%d: Content-Type %s; charset=%s", path, n, mt, params["charset"])
	}
	var r io.Reader = body
	switch cte := h.Get("Content-Transfer-Encoding"); cte {
	case "quoted-printable":
		r = quotedprintable.NewReader(body)
		encodings[cte]++
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, body)
		encodings[cte]++
	case "7bit", "8bit":
	default:
		t.Errorf("%s #%d: Content-Transfer-Encoding %q", path, n, cte)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Errorf("%s #%d: decode: %v", path, n, err)
	}
	return string(b)
}

func TestPoison(t *testing.T) {
	docs, m := corpus(t)
	if m.Totals.Poison != 4 {
		t.Errorf("%d poison files, want 4", m.Totals.Poison)
	}
	rules := map[string]int{}
	for _, d := range docs {
		if d.Kind != KindPoison {
			if strings.HasPrefix(d.Path, "poison/") {
				t.Errorf("%s: in poison/ but of kind %s", d.Path, d.Kind)
			}
			continue
		}
		rules[d.Rule]++
		if !strings.HasPrefix(d.Path, "poison/") || d.Reason == "" {
			t.Errorf("%s: want it under poison/, with a reason", d.Path)
		}
		hasNUL := bytes.IndexByte(d.data, 0) >= 0
		valid := utf8.Valid(d.data)
		noWords := strings.IndexFunc(string(d.data), func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0
		var ok bool
		switch d.Rule {
		case RuleNUL:
			ok = hasNUL
		case RuleControl:
			ctl, n := 0, 0
			for _, c := range d.data {
				n++
				if (c < 0x20 && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r' && c != 0x1b) || c == 0x7f {
					ctl++
				}
			}
			ok = !hasNUL && valid && ctl*20 > n
		case RuleNoWords:
			ok = !hasNUL && valid && noWords
		}
		if !ok {
			t.Errorf("%s does not break its rule %s (NUL %v, valid UTF-8 %v, no words %v)", d.Path, d.Rule, hasNUL, valid, noWords)
		}
	}
	if rules[RuleNUL] != 1 || rules[RuleControl] != 1 || rules[RuleNoWords] != 2 {
		t.Errorf("poison rules %v", rules)
	}
}

func TestExtra(t *testing.T) {
	dir := t.TempDir()
	m, err := Generate(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if extra, err := Extra(dir, m); err != nil || len(extra) != 0 {
		t.Fatalf("fresh corpus: extra files %v, %v", extra, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes", "stray.txt"), []byte("left over\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if extra, err := Extra(dir, m); err != nil || !slices.Equal(extra, []string{"notes/stray.txt"}) {
		t.Errorf("extra files %v, %v; want notes/stray.txt", extra, err)
	}
	if _, err := Generate("", 1); err == nil {
		t.Error("Generate with no directory: no error")
	}
}

func TestWrap(t *testing.T) {
	s := "one two three four five six seven eight nine ten [a link with words](https://example.org/x) eleven"
	got := wrap(s, 20)
	for line := range strings.Lines(got) {
		if utf8.RuneCountInString(strings.TrimSuffix(line, "\n")) > 20 && !strings.Contains(line, "](") {
			t.Errorf("line %q is over 20 runes", line)
		}
	}
	if !strings.Contains(got, "[a link with words](https://example.org/x)") || strings.Join(strings.Fields(got), " ") != s {
		t.Errorf("wrap(%q) = %q", s, got)
	}
	if slug("Saturn's rings: a beginner's view (2019)") != "saturns-rings-a-beginners-view-2019" || slug("Une journée chez le boulanger") != "une-journee-chez-le-boulanger" {
		t.Error("slug")
	}
}
