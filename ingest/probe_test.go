package ingest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
)

// /readyz answers 503 while writes fail, though the database and the index
// answer reads: a full disk makes every stage fail, and a load balancer
// should send its traffic elsewhere.
func TestReadyzReflectsWrites(t *testing.T) {
	t.Parallel()
	svc := newTestService(t)
	clk := clock.NewFake(time.Date(2026, 1, 21, 15, 0, 0, 0, time.UTC))
	probes := 0
	var fail error = syscall.ENOSPC
	svc.probe = &writeProbe{clock: clk, probe: func(ctx context.Context) error {
		probes++
		if fail != nil {
			return probeErr(fail)
		}
		return nil
	}}
	h, err := newHandler(svc, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ready := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on device") {
		t.Fatalf("a full disk: /readyz %d %s, want 503 naming it", code, body)
	}
	// The answer is kept a few seconds: a probe polled often writes
	// seldom.
	fail = nil
	clk.Advance(probeEvery - time.Second)
	if code, _ := ready(); code != http.StatusServiceUnavailable || probes != 1 {
		t.Fatalf("within %v of the probe: /readyz %d after %d probes, want the kept 503 after 1", probeEvery, code, probes)
	}
	clk.Advance(time.Second)
	if code, body := ready(); code != http.StatusOK || probes != 2 {
		t.Fatalf("after %v with space again: /readyz %d %s after %d probes, want 200 after 2", probeEvery, code, body, probes)
	}
}

func probeErr(err error) error {
	return &os.PathError{Op: "write", Path: "/data/.weir-ready-1", Err: err}
}

// The probe itself: it writes into the data directory, and fails when it
// cannot, naming the cause and not the path.
func TestWriteProbe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := probeDir(context.Background(), dir); err != nil {
		t.Fatalf("a writable directory: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the probe left %v", ents)
	}
	gone := filepath.Join(dir, "gone")
	err := probeDir(context.Background(), gone)
	if err == nil || !errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), gone) || !strings.Contains(err.Error(), "does not accept writes") {
		t.Fatalf("a missing directory: %v; want an error naming the cause without the path", err)
	}
	// The service's probe on its own data directory, removed under it.
	svc := newTestService(t)
	data := t.TempDir()
	p := newWriteProbe(filepath.Join(data, "sub"), svc.DB(), clock.Real)
	if err := p.check(context.Background()); err == nil {
		t.Fatal("a probe of a missing directory passed")
	}
	if err := os.Mkdir(filepath.Join(data, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := newWriteProbe(filepath.Join(data, "sub"), svc.DB(), clock.Real).check(context.Background()); err != nil {
		t.Fatalf("a probe of a writable directory: %v", err)
	}
}
