package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"

	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/store/storetest"
	"github.com/weirhq/weir/weirtype"
)

// now is the tests' clock, in whole microseconds.
var now = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		SimSeed: os.Getenv(storetest.SimSeedEnv),
		Open:    func(t *testing.T) store.Store { return openStore(t, newSchema(t)) },
		Tx: func(t *testing.T, s store.Store, commit bool, fn func(store.Executor, func(string) error) error) error {
			ctx := context.Background()
			pg := s.(*postgres.Store)
			tx, err := pg.Pool().Begin(ctx)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			err = fn(pg.Tx(tx), func(sql string) error {
				_, err := tx.Exec(ctx, sql)
				return err
			})
			if err != nil || !commit {
				if rerr := tx.Rollback(ctx); rerr != nil {
					t.Fatalf("rollback: %v", rerr)
				}
				return err
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
			return nil
		},
		QueryInt: func(t *testing.T, s store.Store, sql string) int {
			return queryInt(t, s.(*postgres.Store), sql)
		},
		SetVersion: func(t *testing.T, s store.Store, v int) {
			exec(t, s.(*postgres.Store), "INSERT INTO weir_migrations (version, name) VALUES ($1, 'from_a_newer_weir')", v)
		},
		SetState: func(t *testing.T, s store.Store, id int64, state weirtype.State, attemptedAt time.Time) {
			setState(t, s.(*postgres.Store), id, state, attemptedAt)
		},
	})
}

// newSchema returns a schema name of the test's own.
func newSchema(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "weirtest_" + hex.EncodeToString(b)
}

// openStore opens a store on schema, and drops the schema and closes the
// store when the test ends. Its pool is small: every case runs in parallel
// with a pool of its own, and a server allows 100 connections by default.
func openStore(t *testing.T, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), postgres.Config{URL: testenv.Postgres(t), Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	cleanUp(t, s)
	return s
}

// cleanUp drops s's schema, then closes s, when the test ends.
func cleanUp(t *testing.T, s *postgres.Store) {
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() {
		if _, err := s.Pool().Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.Schema()}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", s.Schema(), err)
		}
	})
}

func migrated(t *testing.T) *postgres.Store {
	t.Helper()
	s := openStore(t, newSchema(t))
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

// migratedExecutor is the executor of a migrated store, for the tests that
// need nothing else of the store.
func migratedExecutor(t *testing.T) store.Executor {
	t.Helper()
	return migrated(t).Executor()
}

func queryInt(t *testing.T, s *postgres.Store, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// wantCount fails the test unless the count query returns want.
func wantCount(t *testing.T, s *postgres.Store, query string, want int) {
	t.Helper()
	if n := queryInt(t, s, query); n != want {
		t.Fatalf("%s: %d, want %d", query, n, want)
	}
}

func exec(t *testing.T, s *postgres.Store, sql string, args ...any) {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// setState leaves job id as a worker would: its latest attempt started at
// attemptedAt; running with a lease, or finished then.
func setState(t *testing.T, s *postgres.Store, id int64, state weirtype.State, attemptedAt time.Time) {
	t.Helper()
	exec(t, s, `UPDATE weir_jobs SET
		state = $2,
		attempt = 1,
		attempted_at = $3,
		updated_at = $3,
		lease_owner = CASE WHEN $2 = 'running' THEN 'storetest-worker' ELSE '' END,
		lease_expires_at = CASE WHEN $2 = 'running' THEN $3::timestamptz + interval '1 minute' END,
		finalized_at = CASE WHEN $2 IN ('completed', 'cancelled', 'dead') THEN $3::timestamptz END
		WHERE id = $1`, id, string(state), attemptedAt)
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := testenv.Postgres(t)
	ctx := context.Background()
	schema := newSchema(t)
	// Four processes start at once on a schema that does not exist yet:
	// each creates it if missing, then migrates, twice over.
	const procs = 4
	stores := make([]*postgres.Store, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			stores[i], errs[i] = postgres.Open(ctx, postgres.Config{URL: url, Schema: schema, MaxConns: 4})
		})
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		cleanUp(t, s)
	}
	var (
		mu      sync.Mutex
		applied int
		merrs   []error
	)
	for _, s := range stores {
		for range 2 {
			wg.Go(func() {
				n, err := s.Migrate(ctx)
				mu.Lock()
				defer mu.Unlock()
				applied += n
				if err != nil {
					merrs = append(merrs, err)
				}
			})
		}
	}
	wg.Wait()
	if len(merrs) > 0 {
		t.Fatalf("%d concurrent migrations failed, first: %v", len(merrs), merrs[0])
	}
	cur, latest, err := stores[0].SchemaVersion(ctx)
	if err != nil || cur != latest {
		t.Fatalf("SchemaVersion = %d, %d, %v; want %d twice", cur, latest, err, latest)
	}
	if applied != latest {
		t.Fatalf("%d migrations applied in all, want each of %d once", applied, latest)
	}
	if n := queryInt(t, stores[0], "SELECT count(*) FROM weir_migrations"); n != latest {
		t.Fatalf("weir_migrations has %d rows, want %d", n, latest)
	}
}

func TestSchemaIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := migrated(t), migrated(t)
	ra := insert(t, a.Executor(), store.InsertParams{Kind: "k", IdempotencyKey: "shared-key"})
	if _, err := b.Executor().GetJob(ctx, ra.Job.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("schema b sees schema a's job: GetJob = %v, want ErrNotFound", err)
	}
	if n := queryInt(t, b, "SELECT count(*) FROM weir_jobs"); n != 0 {
		t.Fatalf("schema b has %d jobs, want 0", n)
	}
	if rb := insert(t, b.Executor(), store.InsertParams{Kind: "k", IdempotencyKey: "shared-key"}); rb.Outcome != weirtype.Inserted {
		t.Fatalf("a key used in schema a is %s in schema b, want inserted", rb.Outcome)
	}
}

// A caller's transaction may come from a pool of its own, whose
// search_path does not name weir's schema.
func TestTxIgnoresSearchPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	var r store.InsertResult
	inCallersTx(t, s, true, func(ex store.Executor) {
		r = insert(t, ex, store.InsertParams{Kind: "k", IdempotencyKey: "k1"})
		if _, err := ex.GetJob(ctx, r.Job.ID); err != nil {
			t.Fatalf("GetJob in the transaction: %v", err)
		}
	})
	if _, err := s.Executor().GetJob(ctx, r.Job.ID); err != nil {
		t.Fatalf("GetJob after commit: %v", err)
	}
}

// inCallersTx runs fn on an Executor bound to a transaction of s's pool
// whose search_path names pg_catalog, not weir's schema, as a caller's own
// pool may; then commits if commit is true, and rolls back otherwise.
func inCallersTx(t *testing.T, s *postgres.Store, commit bool, fn func(ex store.Executor)) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO pg_catalog"); err != nil {
		t.Fatal(err)
	}
	fn(s.Tx(tx))
	if commit {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewLeavesCallersPoolOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	pool, err := pgxpool.New(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after cleanUp's drop, which uses it
	s, err := postgres.New(pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	cleanUp(t, s)
	// Migrate creates the schema New does not.
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, s.Executor(), store.InsertParams{Kind: "k"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("the caller's pool after Close: %v", err)
	}
}

func TestReclaimRecordsTheStuckAttempt(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	first := insertAt(t, s.Executor(), now.Add(-time.Hour), store.InsertParams{Kind: "k", IdempotencyKey: "stuck", Payload: json.RawMessage(`{"v":1}`)})
	setState(t, s, first.Job.ID, weirtype.StateRunning, now.Add(-11*time.Minute-1500*time.Millisecond))
	r := insertAt(t, s.Executor(), now, store.InsertParams{Kind: "k", IdempotencyKey: "stuck", Payload: json.RawMessage(`{"v":2}`)})
	if r.Outcome != weirtype.Reclaimed {
		t.Fatalf("outcome %s, want reclaimed", r.Outcome)
	}
	want := weirtype.AttemptError{Attempt: 1, At: now, Message: "reclaimed after running 11m1.5s without finishing", Type: weirtype.ErrorTypeStuck}
	if len(r.Job.Errors) != 1 || r.Job.Errors[0] != want {
		t.Fatalf("errors %+v, want [%+v]", r.Job.Errors, want)
	}
	if string(r.Job.Payload) != `{"v": 1}` {
		t.Fatalf("payload %s: a reclaim must not change it", r.Job.Payload)
	}
	if r.Job.Attempt != 1 || r.Job.State != weirtype.StateAvailable || r.Job.LeaseOwner != "" || !r.Job.LeaseExpiresAt.IsZero() {
		t.Fatalf("reclaimed job %+v", *r.Job)
	}
	// The reclaimed job waits like any other: a second insert is a
	// duplicate of it.
	if again := insertAt(t, s.Executor(), now, store.InsertParams{Kind: "k", IdempotencyKey: "stuck"}); again.Outcome != weirtype.DuplicatePending {
		t.Fatalf("insert after reclaim: %s, want duplicate_pending", again.Outcome)
	}
}

// weir_duration_text writes a reclaimed job's message in the database; it
// must read as Go's time.Duration.String.
func TestDurationTextMatchesGo(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	durationText := func(t interface{ Fatal(...any) }, d time.Duration) string {
		var got string
		if err := s.Pool().QueryRow(context.Background(), "SELECT weir_duration_text($1)", d.Microseconds()).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, d := range []time.Duration{
		0, time.Microsecond, 999 * time.Microsecond, time.Millisecond, 1500 * time.Microsecond, 1001 * time.Microsecond,
		time.Second, 1500 * time.Millisecond, time.Second + time.Microsecond, time.Minute, 61 * time.Second,
		10 * time.Minute, time.Hour, time.Hour + 500*time.Millisecond, 100*time.Hour + 59*time.Minute + 59*time.Second + 999999*time.Microsecond,
		-time.Minute, -1500 * time.Microsecond, time.Duration(1<<63 - 1).Truncate(time.Microsecond),
	} {
		if got, want := durationText(t, d), d.String(); got != want {
			t.Errorf("weir_duration_text(%d µs) = %q, want %q", d.Microseconds(), got, want)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		d := time.Duration(rapid.Int64Range(-1e15, 1e15).Draw(rt, "µs")) * time.Microsecond
		if got, want := durationText(rt, d), d.String(); got != want {
			rt.Fatalf("weir_duration_text(%d µs) = %q, want %q", d.Microseconds(), got, want)
		}
	})
}

// What PostgreSQL cannot store (a NUL in a text, \u0000 in jsonb) is the
// caller's bad parameter, and the batch writes nothing.
func TestInsertRefusesWhatPostgresCannotStore(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	for _, bad := range []store.InsertParams{
		{Kind: "k", Payload: json.RawMessage(`{"a":"\u0000"}`)},
		{Kind: "k\x00"},
		{Kind: "k", Priority: 1 << 40},
	} {
		_, err := s.Executor().Insert(context.Background(), now, []store.InsertParams{{Kind: "good", IdempotencyKey: "good"}, bad})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("insert of %+v = %v, want ErrInvalid", bad, err)
		}
	}
	wantCount(t, s, "SELECT count(*) FROM weir_jobs", 0)
}

// Concurrent batches that share keys, in the same order: each key makes
// one job, and every other insert of it is a duplicate of that job.
func TestConcurrentBatchesShareKeys(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	const workers, keys = 20, 5
	batch := make([]store.InsertParams, 0, keys+1)
	for k := range keys {
		batch = append(batch, store.InsertParams{Kind: "k", IdempotencyKey: fmt.Sprintf("key-%d", k)})
	}
	batch = append(batch, store.InsertParams{Kind: "k"})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inserted = map[string]int{}
		ids      = map[string]map[int64]bool{}
		errs     []error
	)
	for range workers {
		wg.Go(func() {
			res, err := s.Executor().Insert(context.Background(), now, batch)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for i, r := range res[:keys] {
				key := batch[i].IdempotencyKey
				if r.Outcome == weirtype.Inserted {
					inserted[key]++
				} else if r.Outcome != weirtype.DuplicatePending {
					errs = append(errs, fmt.Errorf("%s: outcome %s", key, r.Outcome))
				}
				if ids[key] == nil {
					ids[key] = map[int64]bool{}
				}
				ids[key][r.Job.ID] = true
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d failures, first: %v", len(errs), errs[0])
	}
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		if inserted[key] != 1 || len(ids[key]) != 1 {
			t.Errorf("%s: inserted %d times over %d ids, want once", key, inserted[key], len(ids[key]))
		}
	}
	wantCount(t, s, "SELECT count(*) FROM weir_jobs", keys+workers)
}

func TestOpenRefusesBadConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, cfg := range []postgres.Config{
		{},
		{URL: "postgres://127.0.0.1/test", MaxConns: -1},
		{URL: "postgres://127.0.0.1/test", Schema: strings.Repeat("s", 64)},
		{URL: "postgres://127.0.0.1/test", Schema: "a\x00b"},
	} {
		if s, err := postgres.Open(ctx, cfg); err == nil {
			_ = s.Close()
			t.Errorf("Open(%+v) succeeded, want an error", cfg)
		}
	}
}

// Open's errors name what went wrong, never the password.
func TestOpenErrorsHidePassword(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: the one a listener just had.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	const pw = "s3cr3t-pw"
	tests := []struct {
		url, want string
	}{
		{"postgres://weir:" + pw + "@127.0.0.1:notaport/test", "parse URL"},
		{"postgres://weir:" + pw + "@127.0.0.1:99999/test", "parse URL"},
		{"postgres://weir:" + pw + "@127.0.0.1/test?sslmode=bogus", "parse URL"},
		{"postgres://weir:s3cr3t%2Dpw@127.0.0.1:notaport/test", "parse URL"},
		{"postgres://weir:" + pw + "@127.0.0.1:" + fmt.Sprint(port) + "/test?sslmode=disable&connect_timeout=5", "connect"},
		{"postgres://weir@127.0.0.1:" + fmt.Sprint(port) + "/test?sslmode=disable&password=" + pw, "connect"},
		{"host=127.0.0.1 port=" + fmt.Sprint(port) + " user=weir password=" + pw + " sslmode=disable", "connect"},
		{"host=127.0.0.1 port=" + fmt.Sprint(port) + " user=weir password='" + pw + "' sslmode=disable", "connect"},
		{"host=127.0.0.1 port=notaport user=weir password=" + pw, "parse URL"},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := postgres.Open(ctx, postgres.Config{URL: tt.url})
		cancel()
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%s) succeeded, want an error", tt.url)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, pw) || !strings.Contains(msg, tt.want) {
			t.Errorf("Open error %q: want it to say %q without the password", msg, tt.want)
		}
	}
}

func insert(t *testing.T, ex store.Executor, p store.InsertParams) store.InsertResult {
	t.Helper()
	return insertAt(t, ex, now, p)
}

// insertBatch inserts n jobs in one call at now, the i-th with the
// parameters p(i).
func insertBatch(t *testing.T, ex store.Executor, n int, p func(i int) store.InsertParams) {
	t.Helper()
	batch := make([]store.InsertParams, n)
	for i := range batch {
		batch[i] = p(i)
	}
	if _, err := ex.Insert(context.Background(), now, batch); err != nil {
		t.Fatal(err)
	}
}

func insertAt(t *testing.T, ex store.Executor, at time.Time, p store.InsertParams) store.InsertResult {
	t.Helper()
	res, err := ex.Insert(context.Background(), at, []store.InsertParams{p})
	if err != nil {
		t.Fatalf("insert %+v: %v", p, err)
	}
	return res[0]
}

// A large batch is one pipeline: thousands of statements, one round trip.
func TestLargeBatch(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	const n = 3000
	batch := make([]store.InsertParams, n)
	for i := range batch {
		batch[i] = store.InsertParams{Kind: "k", IdempotencyKey: fmt.Sprintf("key-%d", i%(n/2)), Payload: json.RawMessage(`{"i":1}`)}
	}
	res, err := s.Executor().Insert(context.Background(), now, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := weirtype.Inserted
		if i >= n/2 {
			want = weirtype.DuplicatePending
		}
		if r.Outcome != want || r.Job.ID != res[i%(n/2)].Job.ID {
			t.Fatalf("res[%d] = %s (id %d), want %s of job %d", i, r.Outcome, r.Job.ID, want, res[i%(n/2)].Job.ID)
		}
	}
	wantCount(t, s, "SELECT count(*) FROM weir_jobs", n/2)
}

func BenchmarkInsert(b *testing.B) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Config{URL: testenv.Postgres(b), Schema: "weirbench_" + fmt.Sprint(time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	defer s.Pool().Exec(ctx, "DROP SCHEMA "+pgx.Identifier{s.Schema()}.Sanitize()+" CASCADE")
	if _, err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	for _, keyed := range []bool{true, false} {
		for _, size := range []int{1, 100} {
			name := fmt.Sprintf("unkeyed/batch=%d", size)
			if keyed {
				name = fmt.Sprintf("keyed/batch=%d", size)
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				batch := make([]store.InsertParams, size)
				n := 0
				for b.Loop() {
					for i := range batch {
						n++
						batch[i] = store.InsertParams{Kind: "k"}
						if keyed {
							batch[i].IdempotencyKey = fmt.Sprintf("bench-%d", n)
						}
					}
					if _, err := s.Executor().Insert(ctx, now, batch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/job")
			})
		}
	}
}

// Of many concurrent inserts of a stuck job's key, one reclaims it and the
// others find it waiting: the job is reclaimed, and its attempt recorded,
// once.
func TestConcurrentReclaimOnce(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	first := insertAt(t, s.Executor(), now.Add(-time.Hour), store.InsertParams{Kind: "k", IdempotencyKey: "stuck"})
	setState(t, s, first.Job.ID, weirtype.StateRunning, now.Add(-time.Hour))
	const n = 50
	outcomes := map[weirtype.InsertOutcome]int{}
	for _, r := range storetest.InsertAtOnce(t, s.Executor(), now, n, store.InsertParams{Kind: "k", IdempotencyKey: "stuck"}) {
		outcomes[r.Outcome]++
	}
	if outcomes[weirtype.Reclaimed] != 1 || outcomes[weirtype.DuplicatePending] != n-1 {
		t.Fatalf("outcomes %v, want 1 reclaimed and %d duplicate_pending", outcomes, n-1)
	}
	got, err := s.Executor().GetJob(context.Background(), first.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Errors) != 1 {
		t.Fatalf("%d errors recorded, want the stuck attempt once: %+v", len(got.Errors), got.Errors)
	}
}
