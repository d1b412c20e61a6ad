package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/corpusgen"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
)

// largeArchive is an mbox of about n bytes: messages of 64 KiB of prose.
func largeArchive(n int) []byte {
	body := corpusgen.Prose(64 << 10)
	var b []byte
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, "From list@example.org Tue Feb  4 09:08:00 2025\nFrom: list@example.org\nSubject: Reservoir %d\n\n", i)
		b = append(append(b, body...), "\n\n"...)
	}
	return b
}

// peaks samples, every millisecond until stop is called, the live heap
// (runtime/metrics: the objects the last collection found live, what the
// service holds), the heap's objects (live ones and those not yet swept:
// what it holds and what it has just dropped) and the process's resident
// memory (Linux; 0 elsewhere), and stop returns the highest of each.
func peaks() (stop func() (live, heap, rss uint64)) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	var (
		mu              sync.Mutex
		live, heap, rss uint64
		done            = make(chan struct{})
		wg              sync.WaitGroup
	)
	read := func() {
		metrics.Read(sample)
		r := residentBytes()
		mu.Lock()
		live = max(live, sample[0].Value.Uint64())
		heap = max(heap, sample[1].Value.Uint64())
		rss = max(rss, r)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() (uint64, uint64, uint64) {
		close(done)
		wg.Wait()
		read()
		mu.Lock()
		defer mu.Unlock()
		return live, heap, rss
	}
}

// residentBytes is the process's resident memory, from /proc/self/statm;
// 0 where there is none.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// countingExtractor extracts nothing but the text's length: the memory
// of a file's processing without the extractor's own.
type countingExtractor struct{}

func (countingExtractor) Extract(_ context.Context, in extract.Input) (extract.Result, error) {
	return extract.Result{Title: "large", Language: "en", WordCount: len(in.Text) / 6, KeyTerms: []string{"reservoir"},
		Summary: "A large file.", Extractor: "counting"}, nil
}

// TestMemoryOfALargeFile ingests one 20 MB file, a text and an archive,
// through every stage (read, parse, extract, save, index, move) and
// bounds the live heap's peak and the bytes allocated: the service holds
// and makes a bounded number of copies of the file, not one per step.
// With an extractor that allocates nothing the bounds are the pipeline's
// own; with the local extractor the figures are printed.
func TestMemoryOfALargeFile(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("ingests 20 MB files and measures memory: run it without -short and without -race")
	}
	const size = 20 << 20
	for _, tc := range []struct {
		name string
		file string
		ex   pipeline.Extractor
		// held and allocated bound, in copies of the file, the live heap's
		// peak and the bytes allocated in all; 0: printed only.
		held, allocated float64
	}{
		// A text is read once (the parser's input), parsed (its text), read
		// back from SQL by extract and by index: four copies allocated,
		// two held at once. Before: six allocated, up to three held.
		{"pipeline only", "big/reservoir.txt", countingExtractor{}, 2.5, 5},
		// An archive is parsed as it is read: its messages are held, not
		// the file. Before: the file and its messages held, eleven copies
		// allocated.
		{"pipeline only, an archive", "big/reservoir.mbox", countingExtractor{}, 1.6, 6},
		{"local extractor", "big/reservoir.txt", extract.NewLocal(), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *pipeline.Config) { c.Extractor = tc.ex })
			content := corpusgen.Prose(size)
			if strings.HasSuffix(tc.file, ".mbox") {
				content = largeArchive(size)
			}
			drop(t, h.dir, tc.file, content)
			content = nil

			// A small GC target makes the collector run often, so that the
			// live heap it reports follows what is held closely.
			defer debug.SetGCPercent(debug.SetGCPercent(10))
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			baseHeap, baseRSS, allocs := ms.HeapAlloc, residentBytes(), ms.TotalAlloc
			stop := peaks()
			h.start()
			waitFor(t, "the large file to be processed and indexed", time.Minute, func() (bool, string) { return settled(t, h.db, 1) })
			live, heap, rss := stop()
			runtime.ReadMemStats(&ms)
			held := live - min(live, baseHeap)
			t.Logf("a %d MB file, %s: live heap peak %.1f MB above the %.1f MB before (%.1f× the file); heap objects peak %.1f MB above; "+
				"resident memory peak %.1f MB above the %.1f MB before; %.1f MB allocated in all",
				size>>20, tc.name, mb(held), mb(baseHeap), float64(held)/size, mb(heap-min(heap, baseHeap)),
				mb(rss-min(rss, baseRSS)), mb(baseRSS), mb(ms.TotalAlloc-allocs))
			if n, all := count(t, h.db, `SELECT count(*) FROM ingest_documents WHERE status = 'saved' AND indexed_at > 0`),
				count(t, h.db, `SELECT count(*) FROM ingest_documents`); n == 0 || n != all {
				t.Fatalf("%d documents of %d saved and indexed, want all", n, all)
			}
			if limit := uint64(tc.held * size); limit > 0 && held > limit {
				t.Errorf("the service held %.1f MB at once to ingest a %d MB file, more than %.0f MB (%.1f× the file)", mb(held), size>>20, mb(limit), tc.held)
			}
			if limit, all := uint64(tc.allocated*size), ms.TotalAlloc-allocs; limit > 0 && all > limit {
				t.Errorf("the service allocated %.1f MB in all to ingest a %d MB file, more than %.0f MB (%.1f× the file)", mb(all), size>>20, mb(limit), tc.allocated)
			}
		})
	}
}

func mb(n uint64) float64 { return float64(n) / (1 << 20) }
