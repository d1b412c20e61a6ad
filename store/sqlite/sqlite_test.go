package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
	"github.com/weirhq/weir/store/storetest"
	"github.com/weirhq/weir/weirtype"
)

func openTemp(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "weir.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func migratedTemp(t testing.TB) *sqlite.Store {
	t.Helper()
	s := openTemp(t)
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// migratedExec returns a context that ends with the test, migratedTemp's
// store and its Executor.
func migratedExec(t testing.TB) (context.Context, *sqlite.Store, store.Executor) {
	t.Helper()
	s := migratedTemp(t)
	return t.Context(), s, s.Executor()
}

// invalidCall is the error of a call with a bad parameter, which must
// wrap store.ErrInvalid and name the parameter (want).
type invalidCall struct {
	name, want string
	err        error
}

// checkInvalid checks the errors of calls.
func checkInvalid(t *testing.T, calls []invalidCall) {
	t.Helper()
	for _, c := range calls {
		if !errors.Is(c.err, store.ErrInvalid) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", c.name, c.err, c.want)
		}
	}
}

// inRolledBackTx runs fn in a caller's transaction on s's database, with
// an Executor bound to it, then rolls the transaction back.
func inRolledBackTx(t *testing.T, s *sqlite.Store, fn func(tx *sql.Tx, ex store.Executor)) {
	t.Helper()
	tx, err := s.DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	fn(tx, s.Tx(tx))
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
}

func harness() storetest.Harness {
	return storetest.Harness{
		SimSeed: os.Getenv(storetest.SimSeedEnv),
		Open:    func(t *testing.T) store.Store { return openTemp(t) },
		Tx: func(t *testing.T, s store.Store, commit bool, fn func(store.Executor, func(string) error) error) error {
			ctx := context.Background()
			ss := s.(*sqlite.Store)
			tx, err := ss.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			exec := func(q string) error {
				_, err := tx.ExecContext(ctx, q)
				return err
			}
			if err := fn(ss.Tx(tx), exec); err != nil || !commit {
				if rerr := tx.Rollback(); rerr != nil {
					t.Fatalf("rollback: %v", rerr)
				}
				return err
			}
			if err := tx.Commit(); err != nil {
				t.Fatalf("commit: %v", err)
			}
			return nil
		},
		QueryInt: func(t *testing.T, s store.Store, q string) int {
			var n int
			if err := s.(*sqlite.Store).DB().QueryRowContext(context.Background(), q).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return n
		},
		SetVersion: func(t *testing.T, s store.Store, v int) {
			_, err := s.(*sqlite.Store).DB().ExecContext(context.Background(),
				"INSERT INTO weir_migrations (version, name, applied_at) VALUES (?, 'from_a_newer_weir', ?)",
				v, time.Now().UnixMicro())
			if err != nil {
				t.Fatalf("set version %d: %v", v, err)
			}
		},
		SetState: func(t *testing.T, s store.Store, id int64, state weirtype.State, attemptedAt time.Time) {
			var owner string
			var leaseExpires, finalized any
			switch {
			case state == weirtype.StateRunning:
				owner = "worker-test"
				leaseExpires = attemptedAt.Add(time.Minute).UnixMicro()
			case state.Final():
				finalized = attemptedAt.Add(time.Second).UnixMicro()
			}
			_, err := s.(*sqlite.Store).DB().ExecContext(context.Background(), `UPDATE weir_jobs SET
				state = ?, attempt = 1, attempted_at = ?, lease_owner = ?, lease_expires_at = ?,
				finalized_at = ?, updated_at = ? WHERE id = ?`,
				string(state), attemptedAt.UnixMicro(), owner, leaseExpires, finalized, attemptedAt.UnixMicro(), id)
			if err != nil {
				t.Fatalf("set state of job %d: %v", id, err)
			}
		},
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness())
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  sqlite.Config
		want string
	}{
		{"empty path", sqlite.Config{}, "Path is empty"},
		{"in-memory", sqlite.Config{Path: ":memory:"}, "not an in-memory database"},
		{"uri", sqlite.Config{Path: "file:weir.db?mode=memory"}, "not an in-memory database or URI"},
		{"negative busy timeout", sqlite.Config{Path: filepath.Join(dir, "x.db"), BusyTimeout: -time.Second}, "BusyTimeout"},
		{"missing directory", sqlite.Config{Path: filepath.Join(dir, "missing", "weir.db")}, "does not exist"},
		{"parent is a file", sqlite.Config{Path: filepath.Join(file, "weir.db")}, "is not a directory"},
		{"path is a directory", sqlite.Config{Path: dir}, "is a directory"},
	}
	for _, tt := range tests {
		s, err := sqlite.Open(context.Background(), tt.cfg)
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q does not say %q", tt.name, err, tt.want)
		}
	}
}

func TestOpenUnwritableDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	if f, err := os.CreateTemp(dir, "probe"); err == nil {
		f.Close()
		t.Skip("a mode 0500 directory is writable here (running as root?): nothing to test")
	}
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "weir.db")})
	if err == nil {
		s.Close()
		t.Fatal("Open in an unwritable directory succeeded")
	}
	if !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("error %q does not say the directory is not writable", err)
	}
}

func TestFileIsInWALMode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weir.db")
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := s.DB().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	var sync, fk, busy int
	if err := s.DB().QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 1 {
		t.Fatalf("synchronous = %d, %v; want 1 (NORMAL)", sync, err)
	}
	if err := s.DB().QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d, %v; want 1", fk, err)
	}
	if err := s.DB().QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil || busy != 5000 {
		t.Fatalf("busy_timeout = %d, %v; want 5000", busy, err)
	}
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// WAL is persistent: the file's header says so (bytes 18 and 19, the
	// read and write format versions, are 2 for WAL, 1 for legacy).
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	header := make([]byte, 100)
	if _, err := f.ReadAt(header, 0); err != nil {
		t.Fatal(err)
	}
	if string(header[:16]) != "SQLite format 3\x00" || header[18] != 2 || header[19] != 2 {
		t.Fatalf("header %q, versions %d/%d; want a SQLite file in WAL mode (2/2)", header[:16], header[18], header[19])
	}
}

func TestDataPersistsAcrossCloseAndOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weir.db")
	at := time.Date(2026, 1, 21, 15, 30, 0, 123456000, time.UTC)
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Executor().Insert(ctx, at, []store.InsertParams{{Kind: "k", IdempotencyKey: "persist", Payload: json.RawMessage(`{"a":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s, err = sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cur, latest, err := s.SchemaVersion(ctx); err != nil || cur != latest {
		t.Fatalf("SchemaVersion after reopen = %d, %d, %v", cur, latest, err)
	}
	if n, err := s.Migrate(ctx); err != nil || n != 0 {
		t.Fatalf("Migrate after reopen = %d, %v; want 0", n, err)
	}
	got, err := s.Executor().GetJob(ctx, res[0].Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != "k" || string(got.Payload) != `{"a":1}` || !got.CreatedAt.Equal(at) || got.IdempotencyKey != "persist" {
		t.Fatalf("job after reopen: %+v", *got)
	}
	again, err := s.Executor().Insert(ctx, at, []store.InsertParams{{Kind: "k", IdempotencyKey: "persist"}})
	if err != nil || again[0].Outcome != weirtype.DuplicatePending {
		t.Fatalf("insert after reopen = %+v, %v; want duplicate_pending", again, err)
	}
}

func TestTimesRoundTripThroughTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedTemp(t)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		paris = time.FixedZone("UTC+1", 3600)
	}
	now := time.Date(2026, 1, 21, 16, 30, 0, 999_999_999, paris) // 15:30:00.999999999 UTC
	tests := []struct {
		name     string
		deadline time.Time
		want     time.Time
	}{
		{"zero is NULL and comes back zero", time.Time{}, time.Time{}},
		{"nanoseconds are dropped", now.Add(time.Hour), time.Date(2026, 1, 21, 16, 30, 0, 999_999_000, time.UTC)},
		{"microseconds are kept", time.Date(2030, 6, 1, 0, 0, 0, 1000, time.UTC), time.Date(2030, 6, 1, 0, 0, 0, 1000, time.UTC)},
		{"before the epoch", time.Date(1969, 12, 31, 23, 59, 59, 999_999_500, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 999_999_000, time.UTC)},
		{"the epoch itself is not zero", time.Unix(0, 0), time.Unix(0, 0).UTC()},
	}
	for _, tt := range tests {
		res, err := s.Executor().Insert(ctx, now, []store.InsertParams{{Kind: "k", DeadlineAt: tt.deadline}})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got, err := s.Executor().GetJob(ctx, res[0].Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.DeadlineAt.Equal(tt.want) || got.DeadlineAt.IsZero() != tt.want.IsZero() {
			t.Errorf("%s: deadline %v, want %v", tt.name, got.DeadlineAt, tt.want)
		}
		if !got.DeadlineAt.IsZero() && got.DeadlineAt.Location() != time.UTC {
			t.Errorf("%s: deadline in %v, want UTC", tt.name, got.DeadlineAt.Location())
		}
		if got.CreatedAt.Location() != time.UTC || !got.CreatedAt.Equal(now.Truncate(time.Microsecond)) {
			t.Errorf("%s: created %v, want %v in UTC", tt.name, got.CreatedAt, now.Truncate(time.Microsecond))
		}
	}
	var isNull bool
	if err := s.DB().QueryRow("SELECT deadline_at IS NULL FROM weir_jobs ORDER BY id LIMIT 1").Scan(&isNull); err != nil || !isNull {
		t.Fatalf("zero deadline stored as NULL: %v, %v", isNull, err)
	}
}

func TestInsertRefusesTimesOutOfRange(t *testing.T) {
	t.Parallel()
	s := migratedTemp(t)
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	for _, p := range []store.InsertParams{
		{Kind: "k", DeadlineAt: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Kind: "k", ScheduledAt: time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, err := s.Executor().Insert(context.Background(), now, []store.InsertParams{p}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("insert %+v = %v, want ErrInvalid", p, err)
		}
	}
	if _, err := s.Executor().Insert(context.Background(), time.Time{}, []store.InsertParams{{Kind: "k"}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("insert at the zero time = %v, want ErrInvalid", err)
	}
}

func TestReclaimRecordsTheStuckAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedTemp(t)
	h := harness()
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	first, err := s.Executor().Insert(ctx, now.Add(-time.Hour), []store.InsertParams{{Kind: "k", IdempotencyKey: "stuck", Payload: json.RawMessage(`{"v":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	id := first[0].Job.ID
	h.SetState(t, s, id, weirtype.StateRunning, now.Add(-30*time.Minute))
	res, err := s.Executor().Insert(ctx, now, []store.InsertParams{{Kind: "k", IdempotencyKey: "stuck", Payload: json.RawMessage(`{"v":2}`)}})
	if err != nil {
		t.Fatal(err)
	}
	got := res[0].Job
	want := weirtype.AttemptError{Attempt: 1, At: now, Message: "reclaimed after running 30m0s without finishing", Type: weirtype.ErrorTypeStuck}
	if res[0].Outcome != weirtype.Reclaimed || got.ID != id || len(got.Errors) != 1 || got.Errors[0] != want {
		t.Fatalf("reclaim: %s, errors %+v; want reclaimed with %+v", res[0].Outcome, got.Errors, want)
	}
	if string(got.Payload) != `{"v":1}` || got.Attempt != 1 || got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() {
		t.Fatalf("reclaimed job %+v", *got)
	}
}

// TestConcurrentWritersAcrossStores runs two stores on one file, as two
// processes would, writing and reading at once: the busy timeout and BEGIN
// IMMEDIATE make them wait for each other, never fail with SQLITE_BUSY.
func TestConcurrentWritersAcrossStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weir.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	if _, err := stores[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	const perStore, keys = 40, 10
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		made = map[weirtype.InsertOutcome]int{}
	)
	for i := range 2 * perStore {
		s := stores[i%2]
		wg.Go(func() {
			key := fmt.Sprintf("key-%d", i%keys)
			res, err := s.Executor().Insert(ctx, now, []store.InsertParams{{Kind: "k", IdempotencyKey: key}, {Kind: "k"}})
			if err == nil {
				_, err = s.Executor().GetJob(ctx, res[0].Job.ID)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			made[res[0].Outcome]++
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d inserts failed, first: %v", len(errs), errs[0])
	}
	if made[weirtype.Inserted] != keys || made[weirtype.DuplicatePending] != 2*perStore-keys {
		t.Fatalf("outcomes %v, want %d inserted", made, keys)
	}
	var n int
	if err := stores[1].DB().QueryRow("SELECT count(*) FROM weir_jobs").Scan(&n); err != nil || n != keys+2*perStore {
		t.Fatalf("%d jobs, %v; want %d", n, err, keys+2*perStore)
	}
}

func TestInsertHonoursContext(t *testing.T) {
	t.Parallel()
	s := migratedTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	if _, err := s.Executor().Insert(ctx, now, []store.InsertParams{{Kind: "k"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("insert with a cancelled context = %v, want context.Canceled", err)
	}
	var n int
	if err := s.DB().QueryRow("SELECT count(*) FROM weir_jobs").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d jobs, %v; want 0", n, err)
	}
}

func TestTxExecutorReadsItsOwnWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedTemp(t)
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	var (
		res  []store.InsertResult
		done *sql.Tx // rolled back when inRolledBackTx returns
	)
	inRolledBackTx(t, s, func(tx *sql.Tx, ex store.Executor) {
		done = tx
		var err error
		res, err = ex.Insert(ctx, now, []store.InsertParams{{Kind: "k"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ex.GetJob(ctx, res[0].Job.ID); err != nil {
			t.Fatalf("GetJob in the transaction: %v", err)
		}
		// Outside the transaction the uncommitted job does not exist.
		if _, err := s.Executor().GetJob(ctx, res[0].Job.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetJob outside the open transaction = %v, want ErrNotFound", err)
		}
	})
	if _, err := s.Executor().GetJob(ctx, res[0].Job.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetJob after rollback = %v, want ErrNotFound", err)
	}
	if _, err := s.Tx(done).Insert(ctx, now, []store.InsertParams{{Kind: "k"}}); !errors.Is(err, sql.ErrTxDone) {
		t.Fatalf("insert in a finished transaction = %v, want sql.ErrTxDone", err)
	}
}

func TestFeatures(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	if f := s.Features(); f != (store.Features{Name: "sqlite"}) {
		t.Fatalf("Features() = %+v", f)
	}
}

// TestReadThenWriteTransactionsNeverFailBusy protects the single write
// connection with BEGIN IMMEDIATE: transactions on DB() that read before
// they write (as a claim does) would fail at once with SQLITE_BUSY on a
// pool of deferred transactions, their snapshots gone stale when another
// connection commits first.
func TestReadThenWriteTransactionsNeverFailBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedTemp(t)
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- func() error {
				tx, err := s.DB().BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				var jobs int
				if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM weir_jobs").Scan(&jobs); err != nil {
					return err
				}
				key := fmt.Sprintf("after-%d-jobs-%d", jobs, i)
				if _, err := s.Tx(tx).Insert(ctx, now, []store.InsertParams{{Kind: "k", IdempotencyKey: key}}); err != nil {
					return err
				}
				return tx.Commit()
			}()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a read-then-write transaction failed: %v", err)
		}
	}
	var jobs, distinct int
	if err := s.DB().QueryRow("SELECT count(*), count(DISTINCT substr(idempotency_key, 1, instr(idempotency_key, '-jobs'))) FROM weir_jobs").Scan(&jobs, &distinct); err != nil {
		t.Fatal(err)
	}
	// Serialised, each transaction saw every one committed before it.
	if jobs != n || distinct != n {
		t.Fatalf("%d jobs with %d distinct counts seen, want %d and %d", jobs, distinct, n, n)
	}
}

// TestPathWithURICharacters: the path becomes a file: URI, so characters
// that mean something in a URI must still name the file as given.
func TestPathWithURICharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "my jobs?mode=memory#1%20.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, BusyTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at the path given: %v", err)
	}
	var busy int
	if err := s.DB().QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil || busy != 1000 {
		t.Fatalf("busy_timeout = %d, %v; want 1000", busy, err)
	}
}
