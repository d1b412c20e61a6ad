package fts

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/search"
)

// topics are words the benchmark's queries look for.
var topics = strings.Fields(`database replica primary disk latency deploy rollback
	migration schema index query planner vacuum checkpoint journal kernel scheduler
	memory cache eviction network packet timeout retry backoff queue worker lease
	deadline release notes meeting budget design review incident postmortem alert
	pager metrics dashboard tracing logging storage bucket archive compress encrypt
	certificate handshake session token password rotate audit compliance policy
	customer invoice payment refund shipping warehouse inventory forecast report`)

// vocabulary is 20,000 words, most of them made of syllables, in order of
// frequency: the topics rank 100 to about 170, so each is in a few
// percent of the generated documents, as a topic word of real text is.
var vocabulary = func() []string {
	syl := strings.Fields("ka lo mi ne ru sa to vi de pa ge fo ri mu za be")
	var made []string
	for i := 0; len(made) < 20_000-len(topics); i++ {
		w := ""
		for n := i + 1; n > 0; n /= len(syl) {
			w += syl[n%len(syl)]
		}
		made = append(made, w)
	}
	return slices.Concat(made[:100], topics, made[100:])
}()

// corpus returns n documents of words words of body each, drawn from
// vocabulary with Zipf's law; the same for the same n and words.
func corpus(n, words int) []search.Doc {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(words)))
	zipf := rand.NewZipf(rng, 1.07, 2, uint64(len(vocabulary)-1))
	pick := func(k int) string {
		ws := make([]string, k)
		for i := range ws {
			ws[i] = vocabulary[zipf.Uint64()]
		}
		return strings.Join(ws, " ")
	}
	docs := make([]search.Doc, n)
	for i := range docs {
		docs[i] = search.Doc{
			ID:        fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()),
			Title:     pick(6),
			Body:      pick(words),
			Summary:   pick(20),
			Source:    fmt.Sprintf("incoming/notes/%d.txt", i),
			Language:  "en",
			Terms:     strings.Fields(pick(4)),
			UpdatedAt: time.UnixMicro(1_700_000_000_000_000 + int64(i)),
		}
	}
	return docs
}

// BenchmarkPut stores documents of 300 words in batches; ns/op and
// allocs/op are per document.
func BenchmarkPut(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ix := openIndex(b)
			docs := corpus(1000, 300)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				page := make([]search.Doc, n)
				for j := range page {
					page[j] = docs[(i+j)%len(docs)]
					page[j].ID = fmt.Sprintf("%s-%d", page[j].ID[:16], i+j) // each a new document
				}
				if err := ix.Put(b.Context(), page...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// BenchmarkSearch searches an index of 10,000 documents of 300 words for
// the best 20 hits: a topic word (in some 5% of the documents), three
// of them, a phrase, a short prefix and a word in most documents.
func BenchmarkSearch(b *testing.B) {
	ix := openIndex(b)
	docs := corpus(10_000, 300)
	for i := 0; i < len(docs); i += 1000 {
		if err := ix.Put(b.Context(), docs[i:i+1000]...); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []string{`postmortem`, `disk latency replica`, `"primary disk"`, `dea*`, `ka*`, `kalo`} {
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hits, err := ix.Search(b.Context(), q, 20)
				if err != nil {
					b.Fatal(err)
				}
				if len(hits) == 0 {
					b.Fatal("no hits")
				}
			}
		})
	}
}
