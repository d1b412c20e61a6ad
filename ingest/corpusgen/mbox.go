package corpusgen

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"mime"
	"mime/quotedprintable"
	"slices"
	"strings"
	"time"
)

// listSpec is one mailing-list archive.
type listSpec struct {
	Path, Name, Address, Domain string
	Theme                       string
	Start                       time.Time
	Messages                    int
	People                      []person
	Threads                     []threadSpec
	Greetings, Closings         []string
	FromParas                   []string // paragraphs that begin with "From "
	Unicode                     []string // paragraphs beyond ASCII, for the encoded messages
	GtFromIntro, GtFromLine     string   // a line that begins with ">From "

	// Which messages (from 0) carry which features.
	QP, FromLines []int
	Base64, Alt   int
	GtFrom        int
}

type person struct {
	Name, Email string
	Zone        int // minutes east of UTC
}

type threadSpec struct{ Subject, Opener string }

var replyOpeners = []string{
	"Thanks for organising this.",
	"Count me in.",
	"I had exactly the same problem last year.",
	"Good idea, though it may be worth asking the committee first.",
	"Sorry to be slow replying to this.",
	"Just to add to what others have said.",
	"That is very helpful, thank you.",
	"I can help with this if needed.",
}

var lists = []*listSpec{
	{
		Path: "lists/stargazers.mbox", Name: "Hollin Ridge Stargazers", Address: "stargazers@lists.example.org",
		Domain: "stargazers.lists.example.org", Theme: "astronomy",
		Start: time.Date(2025, time.February, 3, 18, 12, 0, 0, time.UTC), Messages: 32,
		People: []person{
			{"Margaret Hale", "margaret.hale@example.org", 0},
			{"Tom Ashby", "tom.ashby@example.net", 0},
			{"Priya Shah", "priya.shah@example.com", 0},
			{"Étienne Marchand", "etienne.marchand@example.fr", 60},
			{"Jürgen Weiß", "j.weiss@example.de", 60},
			{"Ngozi Okafor", "n.okafor@example.ac.uk", 0},
			{"Sam Whitlock", "sam@whitlock.example", -300},
		},
		Threads: []threadSpec{
			{"Meteors on Saturday night?", "Is anyone planning to go up to Hollin Ridge to watch for meteors on Saturday night? The forecast looks clear after eleven."},
			{"Collimation help needed", "My Newtonian telescope has been giving soft images all month, and I suspect the collimation is off."},
			{"Dew on the corrector plate", "Every session this winter has ended early because dew forms on the corrector plate within the hour."},
			{"Club telescope loan rota", "The club telescope is free again, so I am drawing up a loan rota for the winter."},
			{"Great Red Spot tonight", "The Great Red Spot should cross the middle of Jupiter's disc at about half past nine tonight."},
			{"Light pollution meeting with the council", "The council has agreed to meet us about the new floodlights at the sports ground."},
			{"Eyepieces for sale", "I am clearing out the cupboard and have four eyepieces to pass on to members at a fair price."},
			{"Comet low in the west", "There is a faint comet low in the west after sunset, just visible in binoculars."},
			{"Outreach evening at the school", "The primary school has asked us to run an evening with telescopes in the playground."},
			{"Minutes of the January meeting", "Please find below a short summary of the January meeting, with the actions we agreed."},
		},
		Greetings: []string{"Hi all,", "Evening all,", "Hello everyone,"},
		Closings:  []string{"Clear skies,", "Cheers,", "Best wishes,"},
		FromParas: []string{
			"From the dark site above Marden the Milky Way was bright enough to cast faint shadows on the snow.",
			"From what I remember, the rota starts in April and runs for two weeks per member.",
			"From Kielder the zodiacal light was obvious after dusk, a cone of pale light leaning along the ecliptic.",
		},
		Unicode: []string{
			"Bonsoir à tous — je serai à Hollin Ridge vendredi avec ma lunette de 80 mm. Le ciel devrait être dégagé, et j'apporterai du café.",
			"The comet sits at about +22° declination this week, a little below the Pleiades; at magnitude 8.5 it needs binoculars.",
			"Jürgen's talk on spectroscopy (»Licht aus der Tiefe«) has moved to Thursday, 19:30, in the café upstairs.",
			"The temperature at the site fell to −4 °C by midnight, so bring flasks and a spare battery for the mount.",
		},
		GtFromIntro: "Quoting the old newsletter, which turned up in the club cupboard:",
		GtFromLine:  ">From the 1987 newsletter: members may borrow the club telescope for two weeks at a time.",
		QP:          []int{4, 11, 19}, FromLines: []int{2, 11, 23}, Base64: 8, Alt: 14, GtFrom: 16,
	},
	{
		Path: "lists/elm-road-allotments.mbox", Name: "Elm Road Allotment Society", Address: "allotments@lists.example.org",
		Domain: "allotments.lists.example.org", Theme: "gardening",
		Start: time.Date(2025, time.June, 2, 8, 40, 0, 0, time.UTC), Messages: 26,
		People: []person{
			{"Bill Rudd", "bill.rudd@example.org", 0},
			{"Harriet Cole", "harriet.cole@example.net", 0},
			{"Kenji Mori", "kenji.mori@example.com", 0},
			{"Adaeze Okoye", "adaeze.okoye@example.org", 0},
			{"Anneliese Schröder", "anneliese@schroeder.example", 60},
			{"Gwen Price", "gwen.price@example.co.uk", 0},
		},
		Threads: []threadSpec{
			{"Water butts and the hosepipe ban", "With the hosepipe ban starting on Monday, please make sure your water butts are connected to the shed gutters."},
			{"Blight on plot 14", "I am sorry to report that the tomatoes on plot 14 have blight, so please keep an eye on your own plants."},
			{"Seed swap in September", "We will hold the autumn seed swap in the hut on the first Saturday in September, from ten until noon."},
			{"Compost bays need turning", "The communal compost bays are full and need turning before the autumn leaves arrive."},
			{"Slug pellets: please don't", "A gentle reminder that metaldehyde slug pellets are not allowed on the site, for the sake of the hedgehogs."},
			{"Rent and shed keys", "Plot rents are due by the end of the month, and the new shed keys can be collected at the same time."},
			{"Spare courgette plants", "I have a dozen spare courgette plants looking for good homes, free to anyone who wants them."},
			{"Pruning workshop on Sunday", "Harriet has kindly offered to run a fruit tree pruning workshop on Sunday morning."},
			{"Rats near the compost", "Someone has seen rats near the compost bays, so please do not add cooked food or bread."},
		},
		Greetings: []string{"Hi all,", "Dear plot holders,", "Morning all,"},
		Closings:  []string{"Best wishes,", "Happy digging,", "Thanks,"},
		FromParas: []string{
			"From next month the gate code changes to the one pinned on the noticeboard in the hut.",
			"From my plot you can see that the far hedge badly needs cutting back before the birds nest.",
			"From the committee: thank you to everyone who came to the working party on Saturday.",
		},
		Unicode: []string{
			"Les tomates « Cœur de bœuf » ont très bien poussé cette année, merci encore pour les graines !",
			"Anneliese's Kräuterbeet is the envy of the site — the thyme, sage and Schnittlauch are all thriving.",
			"The minimum on my plot last night was 4 °C — cold for June, so fleece anything tender before the weekend.",
			"Seed swap list so far: broad beans ‘Aquadulce’, peas ‘Kelvedon Wonder’ and Zoë's sweet peas.",
		},
		GtFromIntro: "For the record, the old rule book says:",
		GtFromLine:  ">From the 1974 tenancy rules: no shed or structure may exceed the height of the boundary hedge.",
		QP:          []int{3, 10, 17}, FromLines: []int{5, 10, 21}, Base64: 7, Alt: 13, GtFrom: 15,
	},
}

// message is one message before it is encoded.
type message struct {
	from      person
	subject   string
	date      time.Time
	id        string
	inReplyTo string
	refs      []string
	quotable  string // the wrapped paragraph a reply quotes
	paras     []string
	encoding  string // "", "quoted-printable", "base64" or "alternative"
}

func themeByKey(key string) *theme {
	for _, th := range themes {
		if th.Key == key {
			return th
		}
	}
	panic("corpusgen: no theme " + key)
}

// mbox makes one mboxrd archive of threaded messages.
func (g *generator) mbox(l *listSpec) (doc, error) {
	th := themeByKey(l.Theme)
	threads := append([]threadSpec(nil), l.Threads...)
	g.shuffle(len(threads), func(i, j int) { threads[i], threads[j] = threads[j], threads[i] })
	var (
		msgs      []*message
		byThread  [][]*message
		t         = l.Start
		nextTopic = 0
		nUnicode  = 0
		fromPara  = 0
	)
	for i := range l.Messages {
		t = t.Add(time.Duration(2+g.intn(28))*time.Hour + time.Duration(g.intn(60))*time.Minute)
		m := &message{date: t}
		used := map[string]bool{}
		var opener string
		if i == 0 || (nextTopic < len(threads) && g.intn(100) < 35) {
			ts := threads[nextTopic]
			nextTopic++
			m.from = l.People[g.intn(len(l.People))]
			m.subject = ts.Subject
			opener = ts.Opener
			m.paras = append(m.paras, g.pick(l.Greetings))
			byThread = append(byThread, []*message{m})
		} else {
			ti := len(byThread) - 1 - g.intn(min(3, len(byThread)))
			thread := byThread[ti]
			parent := thread[len(thread)-1]
			if g.intn(10) < 3 {
				parent = thread[g.intn(len(thread))]
			}
			for m.from = l.People[g.intn(len(l.People))]; m.from == parent.from; m.from = l.People[g.intn(len(l.People))] {
			}
			m.subject = "Re: " + thread[0].subject
			m.inReplyTo = parent.id
			m.refs = append(append([]string(nil), parent.refs...), parent.id)
			opener = g.pick(replyOpeners)
			m.paras = append(m.paras, "Hi "+firstName(parent.from.Name)+",")
			attribution := fmt.Sprintf("On %s, %s wrote:", parent.date.In(zone(parent.from)).Format("Mon, 2 Jan 2006 at 15:04"), parent.from.Name)
			m.paras = append(m.paras, attribution+"\n"+quote(parent.quotable))
			byThread[ti] = append(thread, m)
		}
		m.id = fmt.Sprintf("<%s.%08x@%s>", t.Format("20060102150405"), uint32(g.next()), domainOf(m.from.Email))
		var body []string
		body = append(body, opener)
		for range 1 + g.intn(4) {
			body = append(body, g.sentence(th, used))
		}
		m.quotable = wrap(strings.Join(body, " "), wrapWidth)
		m.paras = append(m.paras, m.quotable)
		if g.intn(2) == 0 {
			m.paras = append(m.paras, wrap(strings.Join([]string{g.sentence(th, used), g.sentence(th, used)}, " "), wrapWidth))
		}
		if slices.Contains(l.FromLines, i) {
			m.paras = append(m.paras, wrap(l.FromParas[fromPara%len(l.FromParas)], wrapWidth))
			fromPara++
		}
		if i == l.GtFrom {
			m.paras = append(m.paras, l.GtFromIntro+"\n\n"+l.GtFromLine)
		}
		switch {
		case slices.Contains(l.QP, i):
			m.encoding = "quoted-printable"
		case i == l.Base64:
			m.encoding = "base64"
		case i == l.Alt:
			m.encoding = "alternative"
		}
		if m.encoding != "" {
			m.paras = append(m.paras, wrap(l.Unicode[nUnicode%len(l.Unicode)], wrapWidth))
			nUnicode++
		}
		m.paras = append(m.paras, g.pick(l.Closings)+"\n"+firstName(m.from.Name))
		msgs = append(msgs, m)
	}

	var b bytes.Buffer
	ids := make([]string, 0, len(msgs))
	texts := make([]string, 0, len(msgs))
	for k, m := range msgs {
		writeMessage(&b, l, m, k)
		ids = append(ids, m.id)
		texts = append(texts, strings.Join(m.paras, "\n\n"))
	}
	return doc{
		File:        File{Path: l.Path, Kind: KindMbox, Title: l.Name, Theme: l.Theme, Lang: "en", Messages: len(msgs), MessageIDs: ids},
		data:        b.Bytes(),
		messageText: texts,
	}, nil
}

func zone(p person) *time.Location {
	return time.FixedZone("", p.Zone*60)
}

func firstName(name string) string {
	name, _, _ = strings.Cut(name, " ")
	return name
}

func domainOf(email string) string {
	_, d, _ := strings.Cut(email, "@")
	return d
}

// quote prefixes every line of text with "> ".
func quote(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// writeMessage appends one message in mboxrd form: the From_ line, the
// headers, the encoded body with its "From " lines quoted, a blank line.
func writeMessage(b *bytes.Buffer, l *listSpec, m *message, k int) {
	text := strings.Join(m.paras, "\n\n") + "\n"
	fmt.Fprintf(b, "From %s %s\n", m.from.Email, m.date.UTC().Format(time.ANSIC))
	fmt.Fprintf(b, "From: %s <%s>\n", mime.QEncoding.Encode("utf-8", m.from.Name), m.from.Email)
	fmt.Fprintf(b, "To: %s <%s>\n", l.Name, l.Address)
	fmt.Fprintf(b, "Subject: %s\n", m.subject)
	fmt.Fprintf(b, "Date: %s\n", m.date.In(zone(m.from)).Format(time.RFC1123Z))
	fmt.Fprintf(b, "Message-ID: %s\n", m.id)
	if m.inReplyTo != "" {
		fmt.Fprintf(b, "In-Reply-To: %s\n", m.inReplyTo)
		fmt.Fprintf(b, "References: %s\n", strings.Join(m.refs, "\n "))
	}
	fmt.Fprintf(b, "List-Id: %s <%s>\n", l.Name, l.Domain)
	b.WriteString("MIME-Version: 1.0\n")
	var body string
	switch m.encoding {
	case "quoted-printable":
		b.WriteString("Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n")
		body = encodeQP(text)
	case "base64":
		b.WriteString("Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n")
		body = encodeBase64(text)
	case "alternative":
		boundary := fmt.Sprintf("=_weir-corpus-alt-%d", k+1)
		fmt.Fprintf(b, "Content-Type: multipart/alternative; boundary=%q\n", boundary)
		var p strings.Builder
		p.WriteString("This is a multi-part message in MIME format.\n\n")
		fmt.Fprintf(&p, "--%s\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: %s\n\n%s\n", boundary, bits(text), text)
		fmt.Fprintf(&p, "--%s\nContent-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: %s\n\n%s\n", boundary, bits(text), htmlOf(m.paras))
		fmt.Fprintf(&p, "--%s--\n", boundary)
		body = p.String()
	default:
		fmt.Fprintf(b, "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: %s\n", bits(text))
		body = text
	}
	b.WriteString("\n")
	for line := range strings.Lines(body) {
		if strings.HasPrefix(strings.TrimLeft(line, ">"), "From ") {
			b.WriteByte('>') // mboxrd: one more '>' on any ">*From " line
		}
		b.WriteString(line)
	}
	b.WriteString("\n")
}

// bits is the Content-Transfer-Encoding of unencoded text.
func bits(s string) string {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return "8bit"
		}
	}
	return "7bit"
}

// encodeQP encodes text as quoted-printable with LF line ends.
func encodeQP(text string) string {
	var b strings.Builder
	w := quotedprintable.NewWriter(&b)
	_, _ = w.Write([]byte(text)) // a strings.Builder does not fail
	_ = w.Close()
	return strings.ReplaceAll(b.String(), "\r\n", "\n")
}

// encodeBase64 encodes text as base64 in lines of 76 characters.
func encodeBase64(text string) string {
	s := base64.StdEncoding.EncodeToString([]byte(text))
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	b.WriteString(s + "\n")
	return b.String()
}

// htmlOf renders paragraphs as a small HTML document; quoted lines become a
// blockquote.
func htmlOf(paras []string) string {
	var b strings.Builder
	b.WriteString("<html><body>\n")
	for _, p := range paras {
		var plain, quoted []string
		for _, line := range strings.Split(p, "\n") {
			if q, ok := strings.CutPrefix(line, "> "); ok {
				quoted = append(quoted, html.EscapeString(q))
			} else {
				plain = append(plain, html.EscapeString(line))
			}
		}
		if len(plain) > 0 {
			b.WriteString("<p>" + strings.Join(plain, "<br>\n") + "</p>\n")
		}
		if len(quoted) > 0 {
			b.WriteString("<blockquote><p>" + strings.Join(quoted, "\n") + "</p></blockquote>\n")
		}
	}
	b.WriteString("</body></html>")
	return b.String()
}
