package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/ledger"
	"github.com/weirhq/weir/ledger/ledgertest"
	"github.com/weirhq/weir/store"
)

// openLedger returns a Ledger on the store's ledger role alone (no more
// than ledger.New needs), and the store's whole Executor.
func openLedger(t *testing.T, path string) (*ledger.Ledger, store.Executor) {
	t.Helper()
	s := teststore.SQLite(t, path)
	return ledger.New(struct{ store.Ledger }{s.Executor()}, nil, slog.New(slog.DiscardHandler)), s.Executor()
}

// counter is an effect that counts its runs.
type counter struct{ runs int }

func (c *counter) effect(result string) ledger.Effect {
	return ledger.Effect{Run: func(context.Context) (string, error) {
		c.runs++
		return result, nil
	}}
}

func TestDoRunsAnEffectOnce(t *testing.T) {
	l, _ := openLedger(t, filepath.Join(t.TempDir(), "weir.db"))
	ctx := context.Background()
	k := store.EffectKey{Txn: "doc-1", Series: "page", Ordinal: 1}
	var c counter
	for i := range 3 {
		got, err := l.Do(ctx, k, c.effect(fmt.Sprint("blobs/doc-1/1#", i)))
		if err != nil || got != "blobs/doc-1/1#0" {
			t.Fatalf("Do %d: %q, %v; want the first run's result", i, got, err)
		}
	}
	if c.runs != 1 {
		t.Fatalf("the effect ran %d times, want once", c.runs)
	}
}

// cutShort begins k as a run would that was killed between the effect and
// its record.
func cutShort(t *testing.T, ex store.Executor, k store.EffectKey) {
	t.Helper()
	if _, begun, err := ex.BeginEffect(context.Background(), t0(), k); err != nil || !begun {
		t.Fatalf("begin: %v, %v", begun, err)
	}
}

func TestDoResolvesAnUnfinishedEffect(t *testing.T) {
	ctx := context.Background()
	check := func(result string, happened bool) func(context.Context) (string, bool, error) {
		return func(context.Context) (string, bool, error) { return result, happened, nil }
	}
	for _, c := range []struct {
		name     string
		check    func(context.Context) (string, bool, error)
		idem     bool
		wantRuns int
		want     string
		wantErr  error
	}{
		{"the check finds it", check("found", true), false, 0, "found", nil},
		{"the check does not find it", check("", false), false, 1, "ran", nil},
		{"no check, idempotent", nil, true, 1, "ran", nil},
		{"no check, not idempotent", nil, false, 0, "", ledger.ErrUnresolved},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, ex := openLedger(t, filepath.Join(t.TempDir(), "weir.db"))
			k := store.EffectKey{Txn: "doc-1", Series: "page", Ordinal: 2}
			cutShort(t, ex, k)
			var n counter
			eff := n.effect("ran")
			eff.Check, eff.Idempotent = c.check, c.idem
			got, err := l.Do(ctx, k, eff)
			if !errors.Is(err, c.wantErr) || got != c.want || n.runs != c.wantRuns {
				t.Fatalf("Do: %q, %v, %d runs; want %q, %v, %d runs", got, err, n.runs, c.want, c.wantErr, c.wantRuns)
			}
			if c.wantErr == nil {
				recs, err := ex.ListEffects(ctx, "doc-1")
				if err != nil || len(recs) != 1 || recs[0].Result != c.want || recs[0].Attempts != 2 {
					t.Fatalf("the record: %+v, %v; want %q after 2 attempts", recs, err, c.want)
				}
			}
		})
	}
}

// An error from Run leaves the effect unfinished: it may have landed.
func TestDoAfterAFailedRun(t *testing.T) {
	l, _ := openLedger(t, filepath.Join(t.TempDir(), "weir.db"))
	ctx := context.Background()
	k := store.EffectKey{Txn: "doc-1", Series: "index"}
	boom := errors.New("connection reset")
	if _, err := l.Do(ctx, k, ledger.Effect{Run: func(context.Context) (string, error) { return "", boom }}); !errors.Is(err, boom) {
		t.Fatalf("Do: %v, want the run's error", err)
	}
	var c counter
	if _, err := l.Do(ctx, k, c.effect("x")); !errors.Is(err, ledger.ErrUnresolved) || c.runs != 0 {
		t.Fatalf("Do again with no check: %v after %d runs; want ErrUnresolved, no run", err, c.runs)
	}
	eff := c.effect("x")
	eff.Idempotent = true
	if got, err := l.Do(ctx, k, eff); err != nil || got != "x" || c.runs != 1 {
		t.Fatalf("Do again, idempotent: %q, %v, %d runs", got, err, c.runs)
	}
}

func TestCountBySeries(t *testing.T) {
	l, _ := openLedger(t, filepath.Join(t.TempDir(), "weir.db"))
	ctx := context.Background()
	var c counter
	for i := range 3 {
		if _, err := l.Do(ctx, store.EffectKey{Txn: "doc-1", Series: "page", Ordinal: int64(i)}, c.effect("p")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Do(ctx, store.EffectKey{Txn: "doc-1", Series: "index"}, c.effect("i")); err != nil {
		t.Fatal(err)
	}
	got, err := l.Count(ctx, "doc-1")
	if want := map[string]int{"page": 3, "index": 1}; err != nil || !maps.Equal(got, want) {
		t.Fatalf("Count: %v, %v; want %v", got, err, want)
	}
}

// A process killed between writing a blob and recording it: the next run
// checks for the blob, finds it, and does not write it again.
func TestKilledAfterTheEffect(t *testing.T) {
	if dir := os.Getenv("LEDGER_CHILD_DIR"); dir != "" {
		teststore.ArmCrashPoint(t)
		l, _ := openLedger(t, filepath.Join(dir, "weir.db"))
		_, err := l.Do(context.Background(), blobKey, blobEffect(dir))
		t.Fatalf("the child was not killed: %v", err)
	}
	dir := t.TempDir()
	teststore.RunKilled(t, "TestKilledAfterTheEffect", "LEDGER_CHILD_DIR="+dir, crashpoint.Env+"="+crashpoint.LedgerAfterEffect)
	l, ex := openLedger(t, filepath.Join(dir, "weir.db"))
	got, err := l.Do(context.Background(), blobKey, blobEffect(dir))
	if err != nil || got != "blob-1" {
		t.Fatalf("Do after the kill: %q, %v", got, err)
	}
	writes, err := os.ReadFile(filepath.Join(dir, "writes"))
	if err != nil || strings.Count(string(writes), "\n") != 1 {
		t.Fatalf("the blob was written %q times (%v), want once", writes, err)
	}
	recs, err := ex.ListEffects(context.Background(), blobKey.Txn)
	if err != nil || len(recs) != 1 || recs[0].Attempts != 2 || recs[0].Result != "blob-1" {
		t.Fatalf("the record: %+v, %v", recs, err)
	}
}

var blobKey = store.EffectKey{Txn: "doc-1", Series: "blob", Ordinal: 1}

// blobEffect writes the blob file blob-1 in dir, and logs each write to
// dir/writes; its check looks for the blob.
func blobEffect(dir string) ledger.Effect { return ledgertest.FileEffect(dir, "blob-1") }

func t0() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
