package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/inbox"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "weir.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`CREATE TABLE grades (submission TEXT PRIMARY KEY, score INTEGER)`); err != nil {
		t.Fatal(err)
	}
	return s
}

func count(t *testing.T, s *sqlite.Store) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM grades`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A message delivered twice runs its handler once; a handler that fails
// leaves no record, so the redelivery runs it again.
func TestHandleRunsEachMessageOnce(t *testing.T) {
	s := openStore(t)
	fc := clock.NewFake(time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC))
	runs := 0
	failNext := true
	h := inbox.Handle(s.RunTx, func(ctx context.Context, tx *sql.Tx, d broker.Delivery) error {
		runs++
		if _, err := tx.ExecContext(ctx, `INSERT INTO grades VALUES (?, 90)`, string(d.Body)); err != nil {
			return err
		}
		if failNext {
			failNext = false
			return errors.New("grading service timed out")
		}
		return nil
	}, inbox.Config{Clock: fc, Logger: slog.New(slog.DiscardHandler)})
	d := broker.Delivery{Message: broker.Message{ID: "weir-1", Topic: "grading.result", Body: []byte("sub-1")}, Attempt: 1}

	if err := h(context.Background(), d); err == nil {
		t.Fatal("the failing handler's error was not returned")
	}
	if n := count(t, s); n != 0 {
		t.Fatalf("the failed attempt's effect committed: %d rows", n)
	}
	d.Attempt = 2
	if err := h(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	d.Attempt = 3 // a redelivery after a lost acknowledgement
	if err := h(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if runs != 2 || count(t, s) != 1 {
		t.Fatalf("handler ran %d times, %d rows; want 2 runs (one failed) and one row", runs, count(t, s))
	}
	window := broker.Features{Name: "nats", Dedupe: true, DedupeWindow: 2 * time.Minute}
	ex := struct{ store.Inbox }{s.Executor()} // the inbox role alone: no more than Purge needs
	if _, err := inbox.Purge(context.Background(), ex, fc.Now(), time.Minute, window); err == nil {
		t.Fatal("a retention shorter than the broker's dedupe window was accepted")
	}
	if n, err := inbox.Purge(context.Background(), ex, fc.Now().Add(8*24*time.Hour), 0, window); err != nil || n != 1 {
		t.Fatalf("purge after the retention: %d, %v", n, err)
	}
}
