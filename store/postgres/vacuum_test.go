package postgres_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
)

// tableStat reads a column of pg_stat_all_tables for s's job table.
func tableStat(t *testing.T, s *postgres.Store, column string) int {
	t.Helper()
	return queryInt(t, s, `SELECT `+column+` FROM pg_stat_all_tables WHERE relid = 'weir_jobs'::regclass`)
}

// deadRows leaves n dead rows in s's job table (inserted, then deleted)
// and waits until the server's statistics count them: a backend reports
// its counts when it goes idle, up to ten seconds later.
func deadRows(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	insertBatch(t, s.Executor(), n, func(int) store.InsertParams { return store.InsertParams{Kind: "k", Queue: "q", Payload: []byte(`{}`)} })
	exec(t, s, `DELETE FROM weir_jobs`)
	deadline := time.Now().Add(15 * time.Second)
	for tableStat(t, s, "n_dead_tup") < n {
		if time.Now().After(deadline) {
			t.Fatalf("the statistics count %d dead rows after 15 s, want %d", tableStat(t, s, "n_dead_tup"), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitStat waits until the column of pg_stat_all_tables for s's job table
// satisfies ok, and returns its value: some servers (13, 14) publish their
// statistics half a second late.
func waitStat(t *testing.T, s *postgres.Store, column string, ok func(int) bool) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := tableStat(t, s, column)
		if ok(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %d after 15 s", column, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// withoutAutovacuum is a migrated store whose job table autovacuum
// leaves alone (autovacuum_enabled = false): the server's setting is
// left as it is for the other tests.
func withoutAutovacuum(t *testing.T) *postgres.Store {
	t.Helper()
	s := migrated(t)
	exec(t, s, `ALTER TABLE weir_jobs SET (autovacuum_enabled = false)`)
	return s
}

// sameSchema opens another store, as another process would, on s's
// schema with cfg (its URL and schema set here), closed at the test's end.
func sameSchema(t *testing.T, s *postgres.Store, cfg postgres.Config) *postgres.Store {
	t.Helper()
	cfg.URL, cfg.Schema = testenv.Postgres(t), s.Schema()
	o, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

// Where autovacuum does not run on the job table, VacuumJobs vacuums it
// once its dead rows pass the threshold autovacuum would apply (the
// table's own settings first), and not again until they do; with
// NoVacuum, never. The server's autovacuum is left as it is: the table's
// autovacuum_enabled = false turns it off for this schema alone.
func TestVacuumJobsWhereAutovacuumIsOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	exec(t, s, `ALTER TABLE weir_jobs SET (autovacuum_enabled = false, autovacuum_vacuum_threshold = 200, autovacuum_vacuum_scale_factor = 0)`)

	deadRows(t, s, 150)
	res, err := s.VacuumJobs(ctx)
	if err != nil || res.Vacuumed || res.Autovacuum || res.Threshold != 200 || res.Dead < 150 {
		t.Fatalf("150 dead rows under the table's threshold of 200: %+v, %v; want no vacuum", res, err)
	}
	if n := tableStat(t, s, "vacuum_count"); n != 0 {
		t.Fatalf("vacuum_count %d under the threshold, want 0", n)
	}

	// Without a NoVacuum, the default threshold and scale factor: a table
	// never vacuumed counts no rows (reltuples -1), so 50 dead rows do.
	exec(t, s, `ALTER TABLE weir_jobs RESET (autovacuum_vacuum_threshold, autovacuum_vacuum_scale_factor)`)
	off := sameSchema(t, s, postgres.Config{MaxConns: 2, NoVacuum: true})
	if res, err := off.VacuumJobs(ctx); err != nil || res != (store.VacuumResult{}) {
		t.Fatalf("NoVacuum: %+v, %v; want nothing done", res, err)
	}
	made, err := postgres.New(s.Pool(), s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	made.DisableVacuum()
	if res, err := made.VacuumJobs(ctx); err != nil || res != (store.VacuumResult{}) {
		t.Fatalf("a store of New after DisableVacuum: %+v, %v; want nothing done", res, err)
	}
	if n := tableStat(t, s, "vacuum_count"); n != 0 {
		t.Fatalf("vacuum_count %d with NoVacuum and DisableVacuum, want 0", n)
	}

	base := queryInt(t, s, `SELECT current_setting('autovacuum_vacuum_threshold')::integer`)
	res, err = s.VacuumJobs(ctx)
	if err != nil || !res.Vacuumed || res.Threshold != int64(base) || res.Dead < 150 || res.Took <= 0 {
		t.Fatalf("150 dead rows over the server's threshold of %d: %+v, %v; want a vacuum", base, res, err)
	}
	waitStat(t, s, "vacuum_count", func(n int) bool { return n == 1 })
	// The rows a transaction of another test could still see stay dead
	// after a vacuum: the next check vacuums again only while they pass
	// the threshold.
	res, err = s.VacuumJobs(ctx)
	if err != nil || res.Vacuumed != (res.Dead > res.Threshold) {
		t.Fatalf("right after the vacuum: %+v, %v; want a vacuum only above the threshold", res, err)
	}
}

// Where the table's autovacuum is on, VacuumJobs leaves the table to it
// when the server's autovacuum runs, and vacuums it itself when the
// server's is off (the table's setting does not turn it on there).
func TestVacuumJobsLeavesTheTableToAutovacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	exec(t, s, `ALTER TABLE weir_jobs SET (autovacuum_enabled = true, autovacuum_vacuum_threshold = 10)`)
	if queryInt(t, s, `SELECT current_setting('autovacuum')::boolean::integer`) == 1 {
		// Dead rows would race the server's own vacuum: none are needed
		// to see that weir leaves the table alone.
		res, err := s.VacuumJobs(ctx)
		if err != nil || !res.Autovacuum || res.Vacuumed {
			t.Fatalf("server's autovacuum on: %+v, %v; want Autovacuum and no vacuum", res, err)
		}
		return
	}
	deadRows(t, s, 20)
	res, err := s.VacuumJobs(ctx)
	if err != nil || res.Autovacuum || !res.Vacuumed {
		t.Fatalf("server's autovacuum off, the table's on: %+v, %v; want a vacuum", res, err)
	}
}

// The vacuum's settings (autovacuum's pace, its lock wait) never reach
// the pool: a pool of one connection shows them as they were after it.
func TestVacuumJobsLeavesThePoolAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withoutAutovacuum(t)
	one := sameSchema(t, s, postgres.Config{MaxConns: 1})
	show := func() (delay, limit, lockWait string) {
		t.Helper()
		if err := one.Pool().QueryRow(ctx, `SELECT current_setting('vacuum_cost_delay'), current_setting('vacuum_cost_limit'), current_setting('lock_timeout')`).Scan(&delay, &limit, &lockWait); err != nil {
			t.Fatal(err)
		}
		return delay, limit, lockWait
	}
	wantDelay, wantLimit, wantLockWait := show()
	deadRows(t, s, 100)
	if res, err := one.VacuumJobs(ctx); err != nil || !res.Vacuumed {
		t.Fatalf("100 dead rows: %+v, %v; want a vacuum", res, err)
	}
	if delay, limit, lockWait := show(); delay != wantDelay || limit != wantLimit || lockWait != wantLockWait {
		t.Fatalf("the pool's connection after the vacuum: vacuum_cost_delay %s, vacuum_cost_limit %s, lock_timeout %s; want %s, %s and %s as before",
			delay, limit, lockWait, wantDelay, wantLimit, wantLockWait)
	}
}

// While another vacuum holds the table (here a transaction holding the
// lock a vacuum takes), VacuumJobs gives up after a short wait and
// reports no vacuum, rather than wait for the other to end and vacuum it
// again.
func TestVacuumJobsSkipsATableAnotherVacuumHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withoutAutovacuum(t)
	deadRows(t, s, 100)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE weir_jobs IN SHARE UPDATE EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := s.VacuumJobs(vctx)
	if err != nil || res.Vacuumed || res.Dead < 100 {
		t.Fatalf("table held by another vacuum: %+v, %v; want it skipped, no error", res, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := s.VacuumJobs(ctx); err != nil || !res.Vacuumed {
		t.Fatalf("once the other let go: %+v, %v; want a vacuum", res, err)
	}
}

// Two processes on one schema (two stores here) checking at once both
// find the dead rows; their vacuums do not wait for each other: one
// vacuums, and the other vacuums too once the first is done or gives up
// while it runs. Neither fails, and a vacuum reported ran.
func TestVacuumJobsFromTwoStoresAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withoutAutovacuum(t)
	other := sameSchema(t, s, postgres.Config{MaxConns: 2})
	deadRows(t, s, 500)
	vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	results := make(chan store.VacuumResult, 2)
	errs := make(chan error, 2)
	for _, st := range []*postgres.Store{s, other} {
		go func() {
			res, err := st.VacuumJobs(vctx)
			results <- res
			errs <- err
		}()
	}
	vacuumed := 0
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a vacuum beside another: %v", err)
		}
		if (<-results).Vacuumed {
			vacuumed++
		}
	}
	if vacuumed == 0 {
		t.Fatal("neither of the two vacuumed")
	}
	// One that gave up on the lock of the table's TOAST relation has
	// vacuumed the table itself already: counted, though not reported.
	n := waitStat(t, s, "vacuum_count", func(n int) bool { return n >= vacuumed })
	if n > 2 {
		t.Fatalf("vacuum_count %d after two vacuums", n)
	}
	t.Logf("%d of the two reported a vacuum, %d counted", vacuumed, n)
}

// The vacuum goes at the pace the table's own autovacuum settings give
// (here a 100 ms sleep for each unit of work: minutes for this table),
// and when its context ends the server stops it, rather than vacuum on
// for a client that is gone.
func TestVacuumJobsAtTheTablesPaceStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migrated(t)
	exec(t, s, `ALTER TABLE weir_jobs SET (autovacuum_enabled = false, autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_cost_limit = 1)`)
	deadRows(t, s, 2000)
	vctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	res, err := s.VacuumJobs(vctx)
	if !errors.Is(err, context.DeadlineExceeded) || res.Vacuumed {
		t.Fatalf("a vacuum at 100 ms a unit of work, cut after 500 ms: %+v, %v; want the context's end, no vacuum", res, err)
	}
	running := func() int {
		return queryInt(t, s, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'VACUUM %' AND query LIKE '%' || $1 || '%'`, s.Schema())
	}
	deadline := time.Now().Add(5 * time.Second)
	for running() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the server still vacuums 5 s after the context ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := tableStat(t, s, "vacuum_count"); n != 0 {
		t.Fatalf("vacuum_count %d, want 0: the vacuum was stopped", n)
	}
}

// The job table is vacuumed at full speed (migration 0021): its own
// autovacuum_vacuum_cost_delay is 0, which the server's autovacuum and
// VacuumJobs (the table's pace first) both take; a pace an operator set
// on the table before the migration ran is kept.
func TestJobTableIsVacuumedAtFullSpeed(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	const delay = `SELECT coalesce((SELECT option_value::integer FROM pg_options_to_table(
		(SELECT reloptions FROM pg_class WHERE oid = 'weir_jobs'::regclass))
		WHERE option_name = 'autovacuum_vacuum_cost_delay'), -1)`
	if got := queryInt(t, s, delay); got != 0 {
		t.Fatalf("the job table's autovacuum_vacuum_cost_delay after the migrations is %d (-1: unset), want 0", got)
	}
	sql, err := os.ReadFile("migrations/0021_jobs_vacuum_pace.sql")
	if err != nil {
		t.Fatal(err)
	}
	exec(t, s, `ALTER TABLE weir_jobs SET (autovacuum_vacuum_cost_delay = 7)`)
	exec(t, s, string(sql))
	if got := queryInt(t, s, delay); got != 7 {
		t.Fatalf("the migration run on a table whose pace an operator set to 7 ms left %d, want 7", got)
	}
}
