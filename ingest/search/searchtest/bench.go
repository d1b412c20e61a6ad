package searchtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/search"
)

// topics are the words BenchSearch looks for: each ranks between 120 and
// 150 in the vocabulary, so that a topic is in a few percent of Corpus's
// documents, as a topic word of real text is.
var topics = strings.Fields(`incident postmortem replica primary disk latency rollback
	migration checkpoint scheduler eviction timeout backoff lease deadline budget
	dashboard tracing archive certificate handshake rotation audit invoice refund
	warehouse forecast`)

// vocabulary returns 20,000 words in order of frequency: made-up words of
// two or three syllables (baba, babe, …), with the topics from rank 120.
var vocabulary = sync.OnceValue(func() []string {
	const consonants, vowels = "bdfgklmnprstvz", "aeiou"
	words := make([]string, 0, 20_000)
	for i := len(consonants) * len(vowels); len(words) < cap(words)-len(topics); i++ {
		var w []byte
		for n := i; n > 0; n /= len(consonants) * len(vowels) {
			s := n % (len(consonants) * len(vowels))
			w = append(w, consonants[s/len(vowels)], vowels[s%len(vowels)])
		}
		words = append(words, string(w))
	}
	out := append(words[:120:120], topics...)
	return append(out, words[120:]...)
})

// Corpus returns n documents of a 6-word title, a body of words words, a
// 20-word summary and 4 key terms, drawn from the vocabulary by Zipf's
// law; every 20th body begins with the phrase "the primary disk was
// full". The same n and words give the same documents.
func Corpus(n, words int) []search.Doc {
	vocab := vocabulary()
	rng := rand.New(rand.NewPCG(uint64(n)<<32|uint64(words), 0x5ea7c4))
	zipf := rand.NewZipf(rng, 1.07, 2, uint64(len(vocab)-1))
	text := func(k int) string {
		var b strings.Builder
		for i := range k {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(vocab[zipf.Uint64()])
		}
		return b.String()
	}
	docs := make([]search.Doc, n)
	for i := range docs {
		body := text(words)
		if i%20 == 0 {
			body = "the primary disk was full " + body
		}
		docs[i] = search.Doc{
			ID:        fmt.Sprintf("doc-%08x-%08x", rng.Uint32(), i),
			Title:     text(6),
			Body:      body,
			Summary:   text(20),
			Source:    fmt.Sprintf("incoming/bench/%d.txt", i),
			Language:  "en",
			Terms:     strings.Fields(text(4)),
			UpdatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second),
		}
	}
	return docs
}

// BenchPut measures Put of new documents of 300 words, one at a time and
// in batches of 100 (one op is one call), and reports documents per
// second.
func BenchPut(b *testing.B, h Harness) {
	docs := Corpus(1000, 300)
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ix := h.Open(b)
			ctx := context.Background()
			written := 0
			page := make([]search.Doc, batch)
			b.ReportAllocs()
			for b.Loop() {
				for j := range page {
					page[j] = docs[written%len(docs)]
					page[j].ID = fmt.Sprintf("put-%09d", written) // a new document each time
					written++
				}
				if err := ix.Put(ctx, page...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(written)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// BenchQueries are the queries of BenchSearch: a topic word (in some 5%
// of the documents), three of them, a phrase, a two-letter prefix, and
// the most common word (in most documents).
func BenchQueries() []string {
	return []string{topics[1], "disk latency replica", `"primary disk"`, "de*", vocabulary()[0]}
}

// BenchSearch indexes Corpus(10000, 300), then measures a search for the
// best 20 hits of each of BenchQueries.
func BenchSearch(b *testing.B, h Harness) {
	ix := h.Open(b)
	ctx := context.Background()
	docs := Corpus(10_000, 300)
	start := time.Now()
	for i := 0; i < len(docs); i += 500 {
		if err := ix.Put(ctx, docs[i:i+500]...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%s: indexed %d documents of 300 words in %v", h.Features.Name, len(docs), time.Since(start).Round(time.Millisecond))
	for _, q := range BenchQueries() {
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hits, err := ix.Search(ctx, q, 20)
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
