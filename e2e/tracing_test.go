package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/eventually"
)

// `weir run -otlp-endpoint` sends its spans over OTLP/HTTP: a collector
// receives one for each stage's attempt.
func TestRunExportsSpans(t *testing.T) {
	skipShort(t)
	var (
		mu   sync.Mutex
		body bytes.Buffer
		reqs int
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			reqs++
			body.Write(b)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()

	p, data, addr := weirRun(t, "e2e-trace", "-watch-every", "100ms", "-otlp-endpoint", collector.URL)
	in := filepath.Join(data, "incoming", "traced")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(in, "a.txt"), "Spans follow this document through every stage.")
	if _, ok := eventually.Wait(30*time.Second, func() (bool, string) { return status(t, addr).Indexed == 1, "" }); !ok {
		t.Fatalf("the document was not indexed; log:\n%s", p.log())
	}
	// Stopping flushes the last batch of spans.
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v; log:\n%s", err, p.log())
	}
	mu.Lock()
	defer mu.Unlock()
	if reqs == 0 {
		t.Fatalf("the collector received no spans; log:\n%s", p.log())
	}
	for _, name := range []string{"weir.job pipeline.parse", "weir.job pipeline.extract", "weir.job pipeline.save", "weir.job pipeline.index"} {
		if !bytes.Contains(body.Bytes(), []byte(name)) {
			t.Errorf("no span %q among the %d exports", name, reqs)
		}
	}
}
