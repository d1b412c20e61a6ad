package parse_test

import "testing"

func TestMarkdown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, title, text string
	}{
		{
			name:  "atx heading is the title",
			src:   "# Quarterly *report*\n\nSome **bold** and _italic_ text.\n",
			title: "Quarterly report",
			text:  "Quarterly report\n\nSome bold and italic text.",
		},
		{
			name:  "first heading wins",
			src:   "intro line\n\n## Second level ##\n\n# First level\n",
			title: "Second level",
			text:  "intro line\n\nSecond level\n\nFirst level",
		},
		{
			name:  "setext heading",
			src:   "Project Weir\n============\n\nBody.\n\nPart two\n--------\n",
			title: "Project Weir",
			text:  "Project Weir\n\nBody.\n\nPart two",
		},
		{
			name:  "no heading",
			src:   "Just a paragraph.",
			title: "",
			text:  "Just a paragraph.",
		},
		{
			name:  "hash without space is not a heading",
			src:   "#hashtag here",
			title: "",
			text:  "#hashtag here",
		},
		{
			name:  "links and images keep their text",
			src:   "See [the docs](https://example.com/docs \"Docs\") and ![a chart](chart.png) or [ref link][1].\n\n[1]: https://example.com",
			title: "",
			text:  "See the docs and a chart or ref link.",
		},
		{
			name: "link with emphasis and parens in url",
			src:  "**[Go *wiki*](https://en.wikipedia.org/wiki/Go_(programming_language))**",
			text: "Go wiki",
		},
		{
			name:  "autolinks",
			src:   "Mail <ops@example.com> or visit <https://example.com/a_b_c>.",
			title: "",
			text:  "Mail ops@example.com or visit https://example.com/a_b_c.",
		},
		{
			name: "code fence markers go, code stays",
			src:  "Run:\n\n```go\nx := a*b*c // *not* emphasis\n```\n\n~~~\nplain\n~~~\n",
			text: "Run:\n\nx := a*b*c // *not* emphasis\n\nplain",
		},
		{
			name: "inline code kept verbatim",
			src:  "Call `foo_bar(*p)` and ``a ` b``.",
			text: "Call foo_bar(*p) and a ` b.",
		},
		{
			name: "snake_case and arithmetic survive",
			src:  "set max_retry_count to 2 * 3 and keep ~5 minutes",
			text: "set max_retry_count to 2 * 3 and keep ~5 minutes",
		},
		{
			name: "strikethrough and strong",
			src:  "~~old~~ __new__ ***both***",
			text: "old new both",
		},
		{
			name: "unmatched delimiters are kept",
			src:  "a *dangling star and **half",
			text: "a *dangling star and **half",
		},
		{
			name: "escapes",
			src:  `\*not emphasis\* and \# and \[x\]`,
			text: `*not emphasis* and # and [x]`,
		},
		{
			name: "block quotes, bullets and breaks",
			src:  "> quoted *line*\n> > nested\n\n- one\n* two\n+ three\n1. first\n\n---\n***\nend",
			text: "quoted line\nnested\n\none\ntwo\nthree\n1. first\n\nend",
		},
		{
			name:  "front matter title used without a heading",
			src:   "---\ntitle: \"Field notes\"\ntags: [a, b]\n---\nBody text.\n",
			title: "Field notes",
			text:  "Body text.",
		},
		{
			name:  "heading beats front matter",
			src:   "---\ntitle: Meta title\n---\n# Real title\n",
			title: "Real title",
			text:  "Real title",
		},
		{
			name: "unclosed fence keeps the rest",
			src:  "```\ncode *x*\nmore",
			text: "code *x*\nmore",
		},
		{
			name: "footnote text is kept",
			src:  "Claim.[^1]\n\n[^1]: The source.",
			text: "Claim.[^1]\n\n[^1]: The source.",
		},
		{
			name:  "crlf",
			src:   "# T\r\n\r\nbody\r\n",
			title: "T",
			text:  "T\n\nbody",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := parseOne(t, "doc.md", []byte(tt.src))
			if d.Title != tt.title {
				t.Errorf("Title = %q, want %q", d.Title, tt.title)
			}
			if d.Text != tt.text {
				t.Errorf("Text =\n%q\nwant\n%q", d.Text, tt.text)
			}
			if d.Key != "" || d.Meta["format"] != "markdown" || len(d.Meta) != 1 {
				t.Errorf("Key %q Meta %v, want \"\" and format markdown only", d.Key, d.Meta)
			}
		})
	}
}
