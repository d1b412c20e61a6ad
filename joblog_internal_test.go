package weir

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/weirhq/weir/weirtype"
)

// countingHandler counts the WithAttrs calls made on it and on what it
// returns.
type countingHandler struct {
	slog.Handler
	withAttrs *int
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	*h.withAttrs++
	return countingHandler{h.Handler.WithAttrs(as), h.withAttrs}
}

func TestJobLoggerAddsTheJobToEveryRecord(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})).With("client", "c1")
	log := jobLogger(base, &weirtype.Job{ID: 7, Kind: "index", Attempt: 2})
	log.Debug("below the level")
	log.Info("first", "n", 1)
	log.WithGroup("g").Warn("grouped", "n", 2)
	log.With("extra", true).Error("with")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (the Debug record is below the level):\n%s", len(lines), buf.String())
	}
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["client"] != "c1" || rec["job_id"] != float64(7) || rec["kind"] != "index" || rec["attempt"] != float64(2) {
			t.Fatalf("line %d lacks the client's or the job's attributes: %s", i, line)
		}
		switch i {
		case 1:
			if g, ok := rec["g"].(map[string]any); !ok || g["n"] != float64(2) {
				t.Fatalf("the group's attribute is not in the group: %s", line)
			}
		case 2:
			if rec["extra"] != true {
				t.Fatalf("the added attribute is missing: %s", line)
			}
		}
	}
}

func TestJobLoggerFormatsNothingUntilItLogs(t *testing.T) {
	var (
		buf   bytes.Buffer
		calls int
	)
	base := slog.New(countingHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), &calls})
	log := jobLogger(base, &weirtype.Job{ID: 1, Kind: "k", Attempt: 1})
	log.Debug("job completed") // below the level, as on a success
	if calls != 0 || buf.Len() != 0 {
		t.Fatalf("an attempt that logged nothing added its attributes %d times and wrote %q", calls, buf.String())
	}
	log.Info("a")
	log.Info("b")
	if calls != 1 {
		t.Fatalf("two records added the job's attributes %d times, want once", calls)
	}
	if n := strings.Count(buf.String(), "job_id=1 kind=k attempt=1"); n != 2 {
		t.Fatalf("%d of 2 records carry the job:\n%s", n, buf.String())
	}
}

// The worker's goroutine and the completer's log the same attempt at once.
func TestJobLoggerIsSafeForConcurrentUse(t *testing.T) {
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})
	log := jobLogger(slog.New(slog.NewTextHandler(w, nil)), &weirtype.Job{ID: 3, Kind: "k", Attempt: 1})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { log.Info("x") })
	}
	wg.Wait()
	if n := strings.Count(buf.String(), "job_id=3"); n != 8 {
		t.Fatalf("%d of 8 records carry the job", n)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// An attempt that logs nothing at the handler's level, as a success does
// at Info: the job's logger made with Logger.With, which formats the
// attributes at once, against jobLogger.
//
//	go test -run '^$' -bench BenchmarkJobLogger .
func BenchmarkJobLogger(b *testing.B) {
	base := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})).With("client", "c1")
	j := &weirtype.Job{ID: 12345, Kind: "index", Attempt: 1}
	b.Run("with", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			base.With(slog.Int64("job_id", j.ID), slog.String("kind", j.Kind), slog.Int("attempt", j.Attempt)).Debug("job completed")
		}
	})
	b.Run("jobLogger", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jobLogger(base, j).Debug("job completed")
		}
	})
}
