package corpusgen

import "strings"

// proseSentences are the sentences of Prose, in turn.
var proseSentences = []string{
	"The reservoir levels dropped again this week.",
	"Engineers from the water board inspected the gates on Monday, and they found that two of them were leaking.",
	"The board will replace the gates before the rainy season.",
	"Monitoring of the reservoir continues every day, café owners nearby say.",
}

// Prose returns about n bytes of English prose, valid UTF-8, in
// paragraphs of five sentences: a large input of any size, for the tests
// and benchmarks of memory and time.
func Prose(n int) []byte {
	var b strings.Builder
	b.Grow(n + 200)
	for i := 0; b.Len() < n; i++ {
		b.WriteString(proseSentences[i%len(proseSentences)])
		if i%5 == 4 {
			b.WriteString("\n\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return []byte(b.String())
}
