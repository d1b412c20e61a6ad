// Command retentionbench shows that weir's jobs table stays bounded while
// jobs flow through it, and that claiming does not slow down as history
// grows, because the retention sweep deletes completed jobs.
//
// It flows -jobs jobs through a fresh store, a round of -round jobs at a
// time (each inserted, claimed and completed through the store's API, as
// a client does), on a simulated clock that moves -step a round. After
// each round the engine's own retention sweep (weir.Client.SweepRetention)
// deletes the completed jobs older than -retention. At each tenth of the
// flow it prints the jobs table's rows and size and the median time of a
// claim of 10 jobs from a probe queue with a standing backlog, and at the
// end the ratios of the last figures to the first. Each claim is timed
// beside one on a control store (another file, or schema, with the same
// backlog and no history), so that the ratio of the two, which a busy
// machine moves less than either, shows what history costs. With -keep
// the sweep is
// not run (weir.KeepJobs): the same flow without retention, for
// comparison.
//
// On PostgreSQL, deleted and updated rows take space until VACUUM reclaims
// it. A production server's autovacuum does; a test server often runs
// with it off, so -vacuum (on by default) vacuums weir_jobs after each
// round, as autovacuum would. With -vacuum=false on such a server the
// rows stay bounded and the size grows with the dead rows. The store is
// opened with postgres.Config.NoVacuum, so that the retention sweep's own
// vacuum (where autovacuum is off) does not run beside -vacuum's.
//
//	go run ./cmd/retentionbench -store sqlite -jobs 1000000
//	go run ./cmd/retentionbench -store postgres -jobs 1000000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/store/sqlite"
)

type settings struct {
	store      string
	url        string
	jobs       int
	round      int
	step       time.Duration
	retention  time.Duration
	keep       bool
	backlog    int
	probeTimes int
	vacuum     bool
	check      bool
}

func main() {
	var s settings
	flag.StringVar(&s.store, "store", "sqlite", "store: sqlite or postgres")
	flag.StringVar(&s.url, "url", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (-store postgres)")
	flag.IntVar(&s.jobs, "jobs", 100_000, "jobs that flow through the table (the documented full run: 1000000)")
	flag.IntVar(&s.round, "round", 10_000, "jobs inserted, claimed and completed per round")
	flag.DurationVar(&s.step, "step", time.Minute, "simulated time a round takes")
	flag.DurationVar(&s.retention, "retention", 10*time.Minute, "retention of completed jobs (Config.JobRetention)")
	flag.BoolVar(&s.keep, "keep", false, "keep every job (weir.KeepJobs): the flow without retention, for comparison")
	flag.IntVar(&s.backlog, "backlog", 1000, "jobs waiting in the probe queue while claims are timed")
	flag.IntVar(&s.probeTimes, "probes", 200, "claims timed at each measurement")
	flag.BoolVar(&s.vacuum, "vacuum", true, "PostgreSQL: VACUUM weir_jobs after each round, as autovacuum does")
	flag.BoolVar(&s.check, "check", false, "exit 1 unless the rows at the end are at most 1.1 × those half way (the flow must last more than twice the retention)")
	flag.Parse()
	switch {
	case s.store != "sqlite" && s.store != "postgres":
		log.Fatalf("-store %q: want sqlite or postgres", s.store)
	case s.jobs < 1 || s.round < 1 || s.backlog < 10 || s.probeTimes < 1:
		log.Fatal("-jobs, -round and -probes must be at least 1, -backlog at least 10")
	case s.step <= 0 || s.retention <= 0:
		log.Fatal("-step and -retention must be positive")
	}
	if err := run(context.Background(), s); err != nil {
		log.Fatal(err)
	}
}

// bench is an open store and how to measure its jobs table.
type bench struct {
	st    store.Store
	ex    store.Executor
	rows  func(context.Context) (int, error)
	bytes func(context.Context) (int64, error)
	// vacuum reclaims the space of dead rows; nil where nothing needs it.
	vacuum func(context.Context) error
	close  func()
}

// open opens and migrates a fresh store.
func open(ctx context.Context, s settings) (*bench, error) {
	b, err := openStore(ctx, s)
	if err != nil {
		return nil, err
	}
	if _, err := b.st.Migrate(ctx); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func openStore(ctx context.Context, s settings) (*bench, error) {
	if s.store == "postgres" {
		schema := fmt.Sprintf("retentionbench_%08x", rand.Uint32())
		// weir's own vacuum (the sweep's, where autovacuum is off) stays
		// out: -vacuum alone says when the table is vacuumed.
		ps, err := postgres.Open(ctx, postgres.Config{URL: s.url, Schema: schema, NoVacuum: true})
		if err != nil {
			return nil, err
		}
		table := pgx.Identifier{schema, "weir_jobs"}.Sanitize()
		b := &bench{st: ps, ex: ps.Executor(), close: func() {
			_, _ = ps.Pool().Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			ps.Close()
		}}
		b.rows = func(ctx context.Context) (n int, err error) {
			err = ps.Pool().QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
			return n, err
		}
		if s.vacuum {
			b.vacuum = func(ctx context.Context) error {
				_, err := ps.Pool().Exec(ctx, "VACUUM "+table)
				return err
			}
		}
		// The table with its indexes and TOAST, as the disk holds it.
		b.bytes = func(ctx context.Context) (n int64, err error) {
			err = ps.Pool().QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", table).Scan(&n)
			return n, err
		}
		return b, nil
	}
	dir, err := os.MkdirTemp("", "retentionbench-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "weir.db")
	ss, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		return nil, err
	}
	b := &bench{st: ss, ex: ss.Executor(), close: func() { ss.Close(); os.RemoveAll(dir) }}
	b.rows = func(ctx context.Context) (int, error) {
		var n int
		err := ss.DB().QueryRowContext(ctx, "SELECT count(*) FROM weir_jobs").Scan(&n)
		return n, err
	}
	// The pages in use (the file less its free pages, which SQLite reuses
	// before it grows the file) and the write-ahead log.
	b.bytes = func(ctx context.Context) (int64, error) {
		var pages, free, size int64
		db := ss.DB()
		if err := db.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
			return 0, err
		}
		if err := db.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
			return 0, err
		}
		if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&size); err != nil {
			return 0, err
		}
		return (pages - free) * size, nil
	}
	return b, nil
}

type point struct {
	flowed int
	rows   int
	bytes  int64
	// claim and control are the median claim times on the store and on
	// the control store; ratio the median of their ratios, claim by claim.
	claim, control time.Duration
	ratio          float64
}

func run(ctx context.Context, s settings) error {
	b, err := open(ctx, s)
	if err != nil {
		return err
	}
	defer b.close()
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	keep := s.retention
	if s.keep {
		keep = weir.KeepJobs
	}
	c, err := weir.NewClient(weir.Config{Store: b.st, ID: "retentionbench", Clock: fc,
		JobRetention: keep, RetentionEvery: s.step, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	ctl, err := open(ctx, s)
	if err != nil {
		return err
	}
	defer ctl.close()
	// The probe queue's standing backlog, on both.
	for _, st := range []*bench{b, ctl} {
		if err := insert(ctx, st.ex, fc.Now(), "probe", s.backlog); err != nil {
			return err
		}
	}
	fmt.Printf("retentionbench: %s, %d jobs in rounds of %d, %v a round, retention %v (keep: %v, vacuum after each round: %v)\n",
		s.store, s.jobs, s.round, s.step, s.retention, s.keep, b.vacuum != nil)
	fmt.Printf("%10s %10s %12s %14s %16s %14s %10s\n", "flowed", "rows", "table MiB", "claim p50 µs", "control p50 µs", "claim/control", "deleted")
	var points []point
	measure := func(flowed, deleted int) error {
		p, err := measureAt(ctx, b, ctl, s, fc.Now(), flowed)
		if err != nil {
			return err
		}
		points = append(points, p)
		fmt.Printf("%10d %10d %12.1f %14.0f %16.0f %14.2f %10d\n", p.flowed, p.rows, float64(p.bytes)/(1<<20),
			float64(p.claim.Microseconds()), float64(p.control.Microseconds()), p.ratio, deleted)
		return nil
	}
	if err := measure(0, 0); err != nil {
		return err
	}
	start := time.Now()
	flowed, deleted, next := 0, 0, s.jobs/10
	for flowed < s.jobs {
		n := min(s.round, s.jobs-flowed)
		if err := flow(ctx, b.ex, fc.Now(), n); err != nil {
			return err
		}
		flowed += n
		fc.Advance(s.step)
		res, err := c.SweepRetention(ctx)
		if err != nil {
			return err
		}
		deleted += res.Deleted["task"]
		if b.vacuum != nil {
			if err := b.vacuum(ctx); err != nil {
				return err
			}
		}
		if flowed >= next || flowed == s.jobs {
			if err := measure(flowed, deleted); err != nil {
				return err
			}
			next += s.jobs / 10
		}
	}
	// The ratios exclude the first point: the table is empty then.
	first, last := points[1], points[len(points)-1]
	fmt.Printf("flowed %d jobs in %v; from %d to %d jobs flowed: rows x%.2f, table size x%.2f, claim p50 x%.2f, claim/control x%.2f\n",
		flowed, time.Since(start).Round(time.Second), first.flowed, last.flowed,
		float64(last.rows)/float64(first.rows), float64(last.bytes)/float64(first.bytes), float64(last.claim)/float64(first.claim),
		last.ratio/first.ratio)
	if s.check {
		mid := points[len(points)/2]
		switch {
		case s.keep || time.Duration(s.jobs/s.round)*s.step <= 2*s.retention:
			return fmt.Errorf("-check needs retention and a flow longer than twice it")
		case float64(last.rows) > 1.1*float64(mid.rows):
			return fmt.Errorf("the table is not bounded: %d rows half way (%d jobs flowed), %d at the end", mid.rows, mid.flowed, last.rows)
		}
		fmt.Printf("check: %d rows half way, %d at the end: bounded\n", mid.rows, last.rows)
	}
	return nil
}

// insert inserts n jobs into queue at now, 1,000 an insert.
func insert(ctx context.Context, ex store.Executor, now time.Time, queue string, n int) error {
	for n > 0 {
		k := min(n, 1000)
		ps := make([]store.InsertParams, k)
		for i := range ps {
			ps[i] = store.InsertParams{Kind: "task", Queue: queue}
		}
		if _, err := ex.Insert(ctx, now, ps); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// flow inserts n jobs and runs them through: claimed 100 at a time and
// completed, as a client's producer and completer do.
func flow(ctx context.Context, ex store.Executor, now time.Time, n int) error {
	if err := insert(ctx, ex, now, "work", n); err != nil {
		return err
	}
	for {
		jobs, err := ex.Claim(ctx, store.ClaimParams{Now: now, Queue: "work", Limit: 100, Owner: "w", LeaseFor: time.Hour})
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
		leases := make([]store.Lease, len(jobs))
		for i, j := range jobs {
			leases[i] = store.LeaseOf(j)
		}
		if _, err := ex.CompleteMany(ctx, now, leases); err != nil {
			return err
		}
	}
}

// measureAt counts the table and times claims of 10 from the probe
// queue, each beside one on the control store ctl, each followed by a
// completion of the jobs it took and the insert of as many, so that the
// backlog stays. The control's completed probes are deleted after, so
// that it keeps no history.
func measureAt(ctx context.Context, b, ctl *bench, s settings, now time.Time, flowed int) (point, error) {
	p := point{flowed: flowed}
	var times, controls []time.Duration
	var ratios []float64
	for range s.probeTimes {
		d, err := probe(ctx, b.ex, now)
		if err != nil {
			return p, err
		}
		c, err := probe(ctx, ctl.ex, now)
		if err != nil {
			return p, err
		}
		times, controls, ratios = append(times, d), append(controls, c), append(ratios, float64(d)/float64(c))
	}
	for {
		n, err := ctl.ex.PurgeJobs(ctx, store.PurgeJobsParams{Kind: "task", Before: now.Add(time.Hour), Limit: store.MaxPurgeLimit})
		if err != nil {
			return p, err
		}
		if n < store.MaxPurgeLimit {
			break
		}
	}
	slices.Sort(times)
	slices.Sort(controls)
	slices.Sort(ratios)
	p.claim, p.control, p.ratio = times[len(times)/2], controls[len(controls)/2], ratios[len(ratios)/2]
	var err error
	if p.rows, err = b.rows(ctx); err != nil {
		return p, err
	}
	p.bytes, err = b.bytes(ctx)
	return p, err
}

// probe times one claim of 10 jobs from the probe queue of ex, then
// completes them and inserts as many.
func probe(ctx context.Context, ex store.Executor, now time.Time) (time.Duration, error) {
	t := time.Now()
	jobs, err := ex.Claim(ctx, store.ClaimParams{Now: now, Queue: "probe", Limit: 10, Owner: "probe", LeaseFor: time.Hour})
	d := time.Since(t)
	if err != nil {
		return 0, err
	}
	leases := make([]store.Lease, len(jobs))
	for i, j := range jobs {
		leases[i] = store.LeaseOf(j)
	}
	if _, err := ex.CompleteMany(ctx, now, leases); err != nil {
		return 0, err
	}
	return d, insert(ctx, ex, now, "probe", len(jobs))
}
