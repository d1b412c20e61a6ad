package weir_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/syncio"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/weirtype"
)

type count struct {
	N int `json:"n"`
}

func (count) Kind() string { return "count" }

// Two clients with different IDs and four workers each, on one PostgreSQL
// schema: each of 200 jobs is completed exactly once.
func TestPostgresTwoClientsCompleteEachJobOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := migratedPostgres(t, "weirtest_engine_", 8)

	const jobs = 200
	var (
		mu   sync.Mutex
		runs = map[int64]int{}
		by   = map[string]int{}
	)
	clients := make([]*weir.Client, 2)
	for i := range clients {
		id := fmt.Sprintf("pg-%d", i)
		ws := weir.NewWorkers()
		if err := weir.AddWorker(ws, weir.WorkFunc(func(_ context.Context, j *weir.Job[count]) error {
			mu.Lock()
			runs[j.ID]++
			by[id]++
			mu.Unlock()
			return nil
		}), weir.KindConfig{}); err != nil {
			t.Fatal(err)
		}
		c, err := weir.NewClient(weir.Config{
			Store: s, Workers: ws, ID: id, PollEvery: 20 * time.Millisecond,
			Queues: map[string]weir.QueueConfig{weir.DefaultQueue: {MaxWorkers: 4}},
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		startClient(t, c)
		clients[i] = c
	}
	params := make([]weir.InsertManyParams, jobs)
	for i := range params {
		params[i] = weir.InsertManyParams{Args: count{N: i}}
	}
	rs, err := clients[0].InsertMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == jobs
	})
	for _, c := range clients {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.Stop(sctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range runs {
		if n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
	for _, r := range rs {
		j, err := s.Executor().GetJob(ctx, r.Job.ID)
		if err != nil || j.State != weirtype.StateCompleted || j.Attempt != 1 {
			t.Fatalf("job %d: %+v, %v", r.Job.ID, j, err)
		}
	}
	t.Logf("runs by client: %v", by)
}

// migratedPostgres opens a PostgreSQL store in a fresh schema; see
// testenv.PostgresStore.
func migratedPostgres(t *testing.T, prefix string, maxConns int32) (*postgres.Store, string) {
	t.Helper()
	return teststore.PostgresStore(t, prefix, maxConns)
}

// On PostgreSQL a job inserted by another process, here another client in
// the caller's transaction, wakes the workers at its commit through
// LISTEN/NOTIFY: it starts within a second although the poll is an hour.
func TestPostgresNotifyWakesAnotherClientAtCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := migratedPostgres(t, "weirtest_notify_", 4)
	if !s.Features().Notify {
		t.Fatal("the PostgreSQL store does not declare Notify")
	}
	ws, started := startedWorkers(t)
	worker, err := weir.NewClient(weir.Config{Store: s, Workers: ws, ID: "listener", PollEvery: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, worker)
	inserter, err := weir.NewClient(weir.Config{Store: s, ID: "inserter", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// The first claim at Start found nothing; give the listener a moment
	// to be listening before the insert.
	waitFor(t, func() bool { return listening(t, s) })

	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inserter.InsertTx(ctx, s.Tx(tx), count{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
		t.Fatal("the job started before its transaction committed")
	case <-time.After(200 * time.Millisecond):
	}
	committed := time.Now()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-started:
		t.Logf("commit to handler start: %v", at.Sub(committed))
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not start within 5 s of its commit; the poll is an hour, so the notification did not wake the worker")
	}
}

// When the listening connection is killed (a pooler, a failover), the
// client listens again at once and then claims: a job whose announcement
// it may have missed, here one inserted by plain SQL that announces
// nothing, starts long before the poll (an hour).
func TestPostgresListenerKilledListensAgainAndClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := migratedPostgres(t, "weirtest_relisten_", 4)
	ws, started := startedWorkers(t)
	logs := &syncio.Buffer{}
	worker, err := weir.NewClient(weir.Config{Store: s, Workers: ws, ID: "relisten", PollEvery: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, worker)
	waitFor(t, func() bool { return listening(t, s) })
	// Listened for long enough (writeRetryBase, 500 ms) that its end is
	// met with a listen at once.
	time.Sleep(700 * time.Millisecond)
	_, err = s.Pool().Exec(ctx, `INSERT INTO `+pgx.Identifier{s.Schema()}.Sanitize()+`.weir_jobs
		(kind, queue, payload, state, max_attempts, source, priority, scheduled_at, created_at, updated_at)
		VALUES ('count', 'default', '{"n": 1}', 'available', 25, '', 0, now(), now(), now())`)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
		t.Fatal("a job inserted without an announcement started before the listener was killed (the poll is an hour)")
	case <-time.After(200 * time.Millisecond):
	}
	var killed int
	err = s.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query ILIKE 'listen%' AND position($1 in query) > 0`, s.NotifyChannel()).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminate the listening backend: %d terminated, %v", killed, err)
	}
	terminated := time.Now()
	select {
	case at := <-started:
		t.Logf("listener killed to handler start: %v", at.Sub(terminated))
	case <-time.After(5 * time.Second):
		t.Fatalf("the job did not start within 5 s after the listener was killed (the poll is an hour); log:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "the connection ended; listening again") {
		t.Errorf("the log does not say the listener listens again:\n%s", logs)
	}
}

// startedWorkers returns workers whose count handler sends the time it
// started on started (room for one).
func startedWorkers(t *testing.T) (*weir.Workers, chan time.Time) {
	t.Helper()
	started := make(chan time.Time, 1)
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(func(context.Context, *weir.Job[count]) error {
		started <- time.Now()
		return nil
	}), weir.KindConfig{}); err != nil {
		t.Fatal(err)
	}
	return ws, started
}

// listening reports whether a session of s's database listens on s's
// notification channel.
func listening(t *testing.T, s *postgres.Store) bool {
	t.Helper()
	var n int
	err := s.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'listen%' AND position($1 in query) > 0`, s.NotifyChannel()).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// On PostgreSQL, where autovacuum does not run on the job table, the
// retention sweep vacuums the table after its deletes once its dead rows
// (here the old versions of claimed and completed jobs) pass the
// threshold autovacuum would apply; the table's own autovacuum_enabled
// = false turns autovacuum off for this test's schema alone.
func TestPostgresRetentionSweepVacuumsWhereAutovacuumIsOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := migratedPostgres(t, "weirtest_vacuum_", 4)
	if _, err := s.Pool().Exec(ctx, `ALTER TABLE weir_jobs SET (autovacuum_enabled = false, autovacuum_vacuum_threshold = 20)`); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, func(*testing.T) store.Store { return s }, weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return nil }),
		weir.KindConfig{}, func(c *weir.Config) {
			c.JobRetention = time.Hour
			c.Store = s // the store itself: the env's wrapper hides its vacuum
		})
	const jobs = 100
	for range jobs {
		e.finished(task{}, weirtype.StateCompleted, t0)
	}
	stat := func(column string) int {
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT `+column+` FROM pg_stat_all_tables WHERE relid = 'weir_jobs'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A backend reports its counts when it goes idle, up to ten seconds
	// later.
	eventually.True(t, "the dead rows counted", 20*time.Second, func() (bool, string) {
		n := stat("n_dead_tup")
		return n > 20, fmt.Sprintf("%d dead rows", n)
	})

	e.fc.Set(t0.Add(2 * time.Hour))
	res, err := e.c.SweepRetention(ctx)
	if err != nil || res.Deleted["task"] != jobs || !res.Vacuum.Vacuumed || res.Vacuum.Threshold != 20 {
		t.Fatalf("sweep: %+v, %v; want %d deleted and the table vacuumed", res, err, jobs)
	}
	eventually.True(t, "the vacuum counted", 15*time.Second, func() (bool, string) {
		n := stat("vacuum_count")
		return n == 1, fmt.Sprintf("vacuum_count %d, want 1", n)
	})
}
