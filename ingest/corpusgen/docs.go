package corpusgen

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The single documents: how many of each kind, and their word bounds.
const (
	numText     = 200
	numMarkdown = 100
	minWords    = 80
	maxWords    = 400
	wrapWidth   = 72
)

// doc is one generated file before it is written.
type doc struct {
	File
	data        []byte
	messageText []string // an archive's messages, decoded
}

// singleDocs makes the text and Markdown documents: the English ones spread
// evenly over the themes in a shuffled order of kinds, then the French and
// German ones.
func (g *generator) singleDocs() ([]doc, error) {
	var foreign []foreignPlan
	for _, ft := range foreignThemes {
		for i := range ft.Titles {
			md := (ft.Lang == "fr" && ft.Theme == "astronomy" && i == 1) ||
				(ft.Lang == "de" && ft.Theme == "railways" && i == 0) ||
				(ft.Lang == "de" && ft.Theme == "beekeeping" && i == 1)
			foreign = append(foreign, foreignPlan{ft, i, md})
		}
	}
	foreignMD := 0
	for _, p := range foreign {
		if p.md {
			foreignMD++
		}
	}
	kinds := make([]Kind, 0, numText+numMarkdown)
	for range numText - (len(foreign) - foreignMD) {
		kinds = append(kinds, KindText)
	}
	for range numMarkdown - foreignMD {
		kinds = append(kinds, KindMarkdown)
	}
	g.shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })

	var docs []doc
	for i, k := range kinds {
		th := themes[i%len(themes)]
		var (
			d   doc
			err error
		)
		switch {
		case k == KindText:
			d, err = g.englishText(th)
		case th.Key == "bread":
			d, err = g.recipe(th)
		default:
			d, err = g.englishMarkdown(th)
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	for _, p := range foreign {
		d, err := g.foreignDoc(p)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

type foreignPlan struct {
	ft    *foreignTheme
	title int
	md    bool
}

// dirFor is where a document of a theme and kind goes.
func dirFor(themeKey string, k Kind) string {
	switch {
	case themeKey == "bread":
		return "recipes"
	case k == KindMarkdown:
		return "articles"
	}
	return "notes"
}

// newDoc checks a finished document and gives it its path.
func (g *generator) newDoc(k Kind, themeKey, lang, title, text string) (doc, error) {
	ext := ".txt"
	if k == KindMarkdown {
		ext = ".md"
	}
	dir := dirFor(themeKey, k)
	base := dir + "/" + themeKey + "-" + slug(title)
	p := base + ext
	for n := 2; g.paths[p]; n++ {
		p = fmt.Sprintf("%s-%d%s", base, n, ext)
	}
	g.paths[p] = true
	w := countWords(text)
	if w < minWords || w > maxWords {
		return doc{}, fmt.Errorf("corpusgen: %s has %d words, want %d to %d", p, w, minWords, maxWords)
	}
	return doc{File: File{Path: p, Kind: k, Title: title, Theme: themeKey, Lang: lang, Words: w}, data: []byte(text)}, nil
}

// title picks a title for a theme that no other document has.
func (g *generator) title(th *theme) string {
	for {
		s := g.pick(th.Subjects)
		var t string
		switch g.intn(10) {
		case 0, 1:
			t = s + " at " + g.pick(th.Places)
		case 2:
			t = fmt.Sprintf("%s, %s %d", s, g.pick(seasons), 1996+g.intn(30))
		case 3:
			t = s + ": a beginner's view"
		case 4:
			t = fmt.Sprintf("%s (%d)", s, 1996+g.intn(30))
		case 5:
			t = s + ", revisited"
		case 6:
			t = s + ": lessons from " + g.pick(th.Places)
		case 7:
			t = s + ", with " + g.pick(th.People)
		case 8:
			t = s + ": what I learned"
		default:
			t = s
		}
		if !g.titles[t] {
			g.titles[t] = true
			return t
		}
	}
}

// sentence fills one template, drawn mostly from the theme's own, and never
// one already used in this document while unused ones remain.
func (g *generator) sentence(th *theme, used map[string]bool) string {
	for tries := 0; ; tries++ {
		var tpl string
		if g.intn(100) < 60 {
			tpl = g.pick(th.Sentences)
		} else {
			tpl = g.pick(generic)
		}
		if used[tpl] && tries < 100 {
			continue
		}
		used[tpl] = true
		return g.fill(tpl, th)
	}
}

// fill replaces a template's slots, fixing "a" before a vowel and
// capitalising the first letter.
func (g *generator) fill(tpl string, th *theme) string {
	var b strings.Builder
	var term string
	for {
		i := strings.IndexByte(tpl, '{')
		if i < 0 {
			b.WriteString(tpl)
			break
		}
		j := strings.IndexByte(tpl[i:], '}') + i
		b.WriteString(tpl[:i])
		var v string
		switch slot := tpl[i+1 : j]; slot {
		case "term":
			term = g.pick(th.Terms)
			v = term
		case "term2":
			for v = g.pick(th.Terms); v == term; v = g.pick(th.Terms) {
			}
		case "person":
			v = g.pick(th.People)
		case "place":
			v = g.pick(th.Places)
		case "task":
			v = g.pick(th.Tasks)
		case "num":
			v = g.pick(numbers)
		case "season":
			v = g.pick(seasons)
		case "day":
			v = g.pick(days)
		default:
			panic("corpusgen: unknown slot " + slot)
		}
		s := b.String()
		if (s == "a " || s == "A " || strings.HasSuffix(s, " a ")) && strings.ContainsRune("aeiouAEIOU", rune(v[0])) {
			b.Reset()
			b.WriteString(s[:len(s)-1] + "n ")
		}
		b.WriteString(v)
		tpl = tpl[j+1:]
	}
	return capitalise(b.String())
}

// paragraphs makes prose of about target words, in paragraphs of three to
// five sentences, within budget words at most.
func (g *generator) paragraphs(th *theme, used map[string]bool, target, budget int) []string {
	var paras []string
	words := 0
	for words < target {
		n := 3 + g.intn(3)
		var ss []string
		for range n {
			s := g.sentence(th, used)
			w := countWords(s)
			if words+w > budget {
				break
			}
			ss = append(ss, s)
			words += w
			if words >= target {
				break
			}
		}
		if len(ss) == 0 {
			break
		}
		paras = append(paras, strings.Join(ss, " "))
	}
	return paras
}

// englishText is a plain-text note: a title line, then wrapped paragraphs,
// sometimes signed.
func (g *generator) englishText(th *theme) (doc, error) {
	title := g.title(th)
	used := map[string]bool{}
	target := 90 + g.intn(271)
	var b strings.Builder
	b.WriteString(title + "\n")
	if g.intn(3) == 0 {
		b.WriteString(strings.Repeat("=", utf8.RuneCountInString(title)) + "\n")
	}
	budget := maxWords - countWords(title) - 2
	for _, p := range g.paragraphs(th, used, target, budget) {
		b.WriteString("\n" + wrap(p, wrapWidth) + "\n")
	}
	if g.intn(4) == 0 {
		b.WriteString("\n-- " + g.pick(signatures) + "\n")
	}
	return g.newDoc(KindText, th.Key, "en", title, b.String())
}

// englishMarkdown is an article: a "# Title" heading, an introduction,
// sections with sub-headings, lists, emphasis and links.
func (g *generator) englishMarkdown(th *theme) (doc, error) {
	title := g.title(th)
	used := map[string]bool{}
	target := 120 + g.intn(231)
	var b strings.Builder
	b.WriteString("# " + title + "\n")
	words := countWords(title)
	const reserve = 40 // for the link sentence and further reading
	intro := g.paragraphs(th, used, 30+g.intn(30), maxWords-reserve-words)
	for i, p := range intro {
		if i == 0 {
			p = emphasise(p, th.Keys, "*")
		}
		b.WriteString("\n" + wrap(p, wrapWidth) + "\n")
		words += countWords(p)
	}
	headings := append(append([]string(nil), th.Headings...), genericHeadings...)
	g.shuffle(len(headings), func(i, j int) { headings[i], headings[j] = headings[j], headings[i] })
	linked := false
	tipsUsed := map[string]bool{}
	var linkUsed link
	for s := 0; words < target && s < len(headings); s++ {
		h := headings[s]
		paras := g.paragraphs(th, used, 40+g.intn(40), maxWords-reserve-words-countWords(h))
		if len(paras) == 0 {
			break
		}
		b.WriteString("\n## " + h + "\n")
		words += countWords(h)
		for i, p := range paras {
			if s == 0 && i == 0 {
				p = emphasise(p, th.Keys, "**")
			}
			if !linked && s == 1 && i == len(paras)-1 {
				l := th.Links[g.intn(len(th.Links))]
				p += " " + capitalise(fmt.Sprintf(g.pick(linkSentences), "["+l.Text+"]("+l.URL+")"))
				linked, linkUsed = true, l
			}
			b.WriteString("\n" + wrap(p, wrapWidth) + "\n")
			words += countWords(p)
		}
		if s == 0 || g.intn(2) == 0 {
			items := sample(g, unused(th.Tips, tipsUsed), 3+g.intn(3))
			w := countWords(strings.Join(items, " "))
			if len(items) >= 2 && words+w <= maxWords-reserve {
				b.WriteString("\n")
				for _, it := range items {
					b.WriteString("- " + it + "\n")
					tipsUsed[it] = true
				}
				words += w
			}
		}
	}
	if !linked || g.intn(2) == 0 {
		b.WriteString("\n## Further reading\n\n")
		for _, l := range sample(g, unused(th.Links, map[link]bool{linkUsed: true}), 2) {
			b.WriteString("- [" + capitalise(l.Text) + "](" + l.URL + ")\n")
		}
	}
	return g.newDoc(KindMarkdown, th.Key, "en", title, b.String())
}

// recipe is a bread recipe in Markdown: ingredients, numbered method, notes.
func (g *generator) recipe(th *theme) (doc, error) {
	var r recipeSpec
	var title string
	for {
		r = recipes[g.intn(len(recipes))]
		switch g.intn(5) {
		case 0:
			title = r.Name + " for beginners"
		case 1:
			title = r.Name + ", the " + g.pick(th.Places[:3]) + " way"
		case 2:
			title = r.Name + ": a reliable method"
		case 3:
			title = r.Name + " from " + g.pick(th.People) + "'s kitchen"
		default:
			title = r.Name
		}
		if !g.titles[title] {
			g.titles[title] = true
			break
		}
	}
	used := map[string]bool{}
	var b strings.Builder
	b.WriteString("# " + title + "\n\n")
	b.WriteString(wrap(emphasise(r.Intro+" "+g.sentence(th, used), th.Keys, "*"), wrapWidth) + "\n")
	b.WriteString("\n## Ingredients\n\n")
	for _, it := range r.Ingredients {
		b.WriteString("- " + it + "\n")
	}
	b.WriteString("\n## Method\n\n")
	n := 0
	for i, step := range method {
		if i >= 2 && i <= 6 && g.intn(3) == 0 {
			continue // an optional step
		}
		n++
		b.WriteString(fmt.Sprintf("%d. %s\n", n, step))
	}
	words := countWords(b.String())
	notes := g.paragraphs(th, used, 30+g.intn(60), maxWords-words-20)
	b.WriteString("\n## Notes\n")
	for i, p := range notes {
		if i == len(notes)-1 {
			l := th.Links[g.intn(len(th.Links))]
			p += " " + capitalise(fmt.Sprintf(g.pick(linkSentences), "["+l.Text+"]("+l.URL+")"))
		}
		b.WriteString("\n" + wrap(emphasise(p, th.Keys, "**"), wrapWidth) + "\n")
	}
	return g.newDoc(KindMarkdown, th.Key, "en", title, b.String())
}

// foreignDoc is a French or German document: its sentences are drawn
// without repeats from the theme's pool.
func (g *generator) foreignDoc(p foreignPlan) (doc, error) {
	ft := p.ft
	title := ft.Titles[p.title]
	g.titles[title] = true
	pool := append([]string(nil), ft.Sentences...)
	g.shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	th := &theme{People: ft.People, Places: ft.Places}
	target := 95 + g.intn(50)
	var sentences []string
	words := countWords(title)
	for _, tpl := range pool {
		if words >= target {
			break
		}
		s := g.fillForeign(tpl, ft, th)
		sentences = append(sentences, s)
		words += countWords(s)
	}
	var b strings.Builder
	k := KindText
	if p.md {
		k = KindMarkdown
		h := foreignHeadings[ft.Lang]
		b.WriteString("# " + title + "\n\n")
		if len(sentences) < 7 {
			return doc{}, fmt.Errorf("corpusgen: %q has only %d sentences", title, len(sentences))
		}
		b.WriteString(wrap(emphasise(strings.Join(sentences[:3], " "), ft.Keys, "*"), wrapWidth) + "\n")
		b.WriteString("\n## " + h[0] + "\n\n")
		for _, s := range sentences[3:6] {
			b.WriteString("- " + s + "\n")
		}
		b.WriteString("\n## " + h[1] + "\n\n")
		b.WriteString(wrap(emphasise(strings.Join(sentences[6:], " "), ft.Keys, "**"), wrapWidth) + "\n")
	} else {
		b.WriteString(title + "\n")
		for len(sentences) > 0 {
			n := min(3+g.intn(2), len(sentences))
			b.WriteString("\n" + wrap(strings.Join(sentences[:n], " "), wrapWidth) + "\n")
			sentences = sentences[n:]
		}
	}
	return g.newDoc(k, ft.Theme, ft.Lang, title, b.String())
}

func (g *generator) fillForeign(tpl string, ft *foreignTheme, th *theme) string {
	r := strings.NewReplacer("{person}", g.pick(th.People), "{place}", g.pick(th.Places), "{num}", g.pick(ft.Numbers))
	return r.Replace(tpl)
}

// emphasise marks the first whole-word occurrence of the first key found
// in p with the delimiter, or failing any, p's first word of eight letters
// or more.
func emphasise(p string, keys []string, delim string) string {
	for _, k := range keys {
		if i := wordIndex(p, k); i >= 0 {
			return p[:i] + delim + k + delim + p[i+len(k):]
		}
	}
	for _, f := range strings.Fields(p) {
		w := strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) })
		if utf8.RuneCountInString(w) >= 8 && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) < 0 {
			if i := wordIndex(p, w); i >= 0 {
				return p[:i] + delim + w + delim + p[i+len(w):]
			}
		}
	}
	return p
}

// wordIndex is the index of word in s as a whole word, or -1.
func wordIndex(s, word string) int {
	for off := 0; ; {
		i := strings.Index(s[off:], word)
		if i < 0 {
			return -1
		}
		i += off
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[i+len(word):])
		if !unicode.IsLetter(before) && !unicode.IsLetter(after) {
			return i
		}
		off = i + len(word)
	}
}

// recipeSpec is one bread recipe's fixed parts.
type recipeSpec struct {
	Name        string
	Intro       string
	Ingredients []string
}

var recipes = []recipeSpec{
	{"Basic white loaf", "This is the loaf to learn on: four ingredients and an afternoon.",
		[]string{"500 g strong white flour", "10 g salt", "7 g dried yeast", "340 ml warm water"}},
	{"Country sourdough", "A crusty sourdough with a little wholemeal for flavour.",
		[]string{"450 g strong white flour", "50 g wholemeal flour", "100 g active sourdough starter", "350 ml water", "10 g salt"}},
	{"Dark rye bread", "A dense, moist rye loaf that keeps for a week and slices thin.",
		[]string{"400 g dark rye flour", "100 g strong white flour", "150 g rye sourdough starter", "400 ml warm water", "12 g salt", "1 tbsp black treacle", "1 tsp caraway seeds"}},
	{"Seeded spelt loaf", "Spelt makes a nutty loaf that needs a gentle hand when kneading.",
		[]string{"500 g wholegrain spelt flour", "60 g mixed seeds", "7 g dried yeast", "10 g salt", "350 ml warm water", "1 tbsp honey"}},
	{"Soft milk rolls", "Soft rolls for picnics, enriched with milk and a little butter.",
		[]string{"500 g strong white flour", "7 g dried yeast", "10 g salt", "300 ml warm milk", "40 g soft butter", "1 egg, beaten, to glaze"}},
	{"Rosemary focaccia", "A wet dough baked in a tin with plenty of olive oil.",
		[]string{"500 g strong white flour", "7 g dried yeast", "10 g salt", "400 ml warm water", "4 tbsp olive oil", "2 sprigs rosemary", "flaky sea salt"}},
	{"Wholemeal tin loaf", "A sturdy sandwich loaf baked in a two-pound tin.",
		[]string{"500 g strong wholemeal flour", "7 g dried yeast", "10 g salt", "360 ml warm water", "1 tbsp rapeseed oil"}},
	{"Overnight baguettes", "Three thin baguettes from a dough that rests in the fridge overnight.",
		[]string{"500 g strong white flour", "3 g dried yeast", "10 g salt", "360 ml cold water"}},
	{"Cinnamon buns", "Sticky buns for a Sunday morning, rolled with butter and cinnamon sugar.",
		[]string{"500 g strong white flour", "7 g dried yeast", "8 g salt", "250 ml warm milk", "60 g caster sugar", "75 g soft butter", "2 tsp ground cinnamon", "80 g brown sugar"}},
	{"Brioche", "A rich, golden dough; make it the day before and chill it well.",
		[]string{"500 g strong white flour", "7 g dried yeast", "10 g salt", "50 g caster sugar", "5 eggs", "250 g soft butter"}},
	{"Cheese and onion bread", "A savoury loaf with cheddar worked into the dough and scattered on top.",
		[]string{"500 g strong white flour", "7 g dried yeast", "10 g salt", "330 ml warm water", "120 g mature cheddar, grated", "1 onion, finely chopped and softened"}},
	{"Malted grain loaf", "Malted flakes and grains give this loaf its sweet, toasty crumb.",
		[]string{"500 g malted grain flour", "7 g dried yeast", "10 g salt", "330 ml warm water", "1 tbsp malt extract"}},
}

// method is the general method of the recipes; steps 3 to 7 are optional.
var method = []string{
	"Weigh the flour and the salt into a large bowl and mix them well.",
	"Add the liquid and the yeast or starter, and stir with a dough scraper until no dry flour remains.",
	"Rest the dough for twenty minutes so the flour can absorb the water.",
	"Knead for ten minutes on an unfloured surface, until the dough is smooth and elastic.",
	"Cover the bowl and leave the dough to rise until doubled, about an hour and a half in a warm kitchen.",
	"Knock back the dough gently and shape it into a tight ball or a long oval.",
	"Prove in a floured proving basket or an oiled tin until a finger pressed into the side leaves a slow-filling dent.",
	"Heat the oven to 230 °C with a baking stone or a heavy tray on the middle shelf.",
	"Score the top with a sharp blade and bake for thirty to forty minutes, with steam for the first fifteen.",
	"Cool on a wire rack for at least an hour before slicing.",
}

// unused is the elements of xs not in used.
func unused[T comparable](xs []T, used map[T]bool) []T {
	var out []T
	for _, x := range xs {
		if !used[x] {
			out = append(out, x)
		}
	}
	return out
}
