package loadbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Stat is the median and the maximum of a measure's one-second samples
// over a phase.
type Stat struct {
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// PhaseResult is one phase of one system at one worker count.
type PhaseResult struct {
	Phase    PhaseKind `json:"phase"`
	Seconds  float64   `json:"seconds"`
	Factor   float64   `json:"load_factor"`
	Produced int64     `json:"produced"`
	// InsertErrors counts the producer's insert calls that failed.
	InsertErrors int64 `json:"insert_errors"`
	// Completed counts the handlers that returned during the phase.
	Completed int64 `json:"completed"`
	// Rate is the median of the one-second completion rates (jobs/s);
	// RateMin the lowest.
	Rate    float64 `json:"rate"`
	RateMin float64 `json:"rate_min"`
	// Pickup latencies in ms, from the producer's insert call to the
	// handler's start: per one-second window, median and max over the
	// phase; and over the whole phase.
	P50         Stat    `json:"pickup_p50_ms"`
	P95         Stat    `json:"pickup_p95_ms"`
	P99         Stat    `json:"pickup_p99_ms"`
	PhaseP50    float64 `json:"phase_pickup_p50_ms"`
	PhaseP99    float64 `json:"phase_pickup_p99_ms"`
	PickupMaxMs float64 `json:"pickup_max_ms"`
	// InsertP50 and InsertP99 are the producer's insert calls' durations
	// (ms) over the phase.
	InsertP50 float64 `json:"insert_call_p50_ms"`
	InsertP99 float64 `json:"insert_call_p99_ms"`
	Depth     Stat    `json:"depth"`
	// The job table (pg_stat_user_tables; pg_total_relation_size, with
	// its indexes and TOAST) at the phase's end, and its most dead tuples.
	DeadEnd int64 `json:"dead_tuples"`
	DeadMax int64 `json:"dead_tuples_max"`
	LiveEnd int64 `json:"live_tuples"`
	SizeEnd int64 `json:"table_bytes"`
	// CPU seconds per 1,000 completed jobs of the worker process(es) and
	// of the database backends of the system's connections (producer's
	// and workers').
	WorkerCPUPer1k float64 `json:"worker_cpu_s_per_1k"`
	DBCPUPer1k     float64 `json:"db_cpu_s_per_1k"`
	// ProducerDBCPUPer1k is the part of DBCPUPer1k spent by the backends
	// of the producer's connections (the inserts).
	ProducerDBCPUPer1k float64 `json:"db_cpu_producer_s_per_1k"`
	// ClaimScans counts the scans of the claim (fetch) index during the
	// phase, EntriesPerScan the index entries each returned on average
	// (pg_stat_user_indexes; entries already marked dead are skipped
	// without being counted) and BlocksPerScan the index's buffer accesses
	// per scan (pg_statio_user_indexes), which do count the pages of such
	// entries. Scans of the benchmark's depth count are among them when
	// it reads that index. HeapBlocksPerJob and IndexBlocksPerJob are the job
	// table's buffer accesses per completed job (pg_statio_user_tables).
	ClaimScans        int64   `json:"claim_scans"`
	EntriesPerScan    float64 `json:"claim_index_entries_per_scan"`
	BlocksPerScan     float64 `json:"claim_index_blocks_per_scan"`
	HeapBlocksPerJob  float64 `json:"heap_blocks_per_job"`
	IndexBlocksPerJob float64 `json:"index_blocks_per_job"`
	// UpdatesPerJob counts the job table's row updates per completed job,
	// HOTPercent the share of them that were heap-only (no index entry
	// written).
	UpdatesPerJob float64 `json:"updates_per_job"`
	HOTPercent    float64 `json:"hot_update_percent"`
	// RecoverySeconds is the time from the fault's end to the first
	// sample back at the baseline (see recoveryTime); -1 when not
	// measured. Recovered is false when no sample of the window was.
	RecoverySeconds float64        `json:"recovery_s"`
	Recovered       bool           `json:"recovered"`
	Fault           string         `json:"fault,omitempty"`
	Waits           map[string]int `json:"wait_events,omitempty"`
	Samples         []sample       `json:"samples"`
	RecoverySamples []sample       `json:"recovery_samples,omitempty"`
	// AfterP99 is the pickup p99 of the one-second windows of the
	// recovery window, after the fault has stopped: median and max.
	AfterP99 Stat `json:"after_pickup_p99_ms"`
}

// RunResult is one system at one worker count, through every phase.
type RunResult struct {
	System  System        `json:"system"`
	Workers int           `json:"workers"`
	Schema  string        `json:"schema"`
	Phases  []PhaseResult `json:"phases"`
	// The exactly-once check, in the database after the drain: Produced
	// jobs (inserts that succeeded, and those whose insert failed but
	// whose row exists), Lost (no completed row), DupCompleted (more than
	// one completed row of a sequence number), DupRows (rows beyond the
	// first of a sequence number), Reruns (completed at an attempt above
	// 1: run again after a kill), Unfinished (rows not completed).
	Produced     int64 `json:"produced"`
	NotInserted  int64 `json:"not_inserted"`
	Lost         int64 `json:"lost"`
	DupCompleted int64 `json:"duplicate_completions"`
	DupRows      int64 `json:"duplicate_rows"`
	Reruns       int64 `json:"reruns"`
	// WorkTwice counts the jobs whose handler finished its work more than
	// once (its success lost with a killed process before it was
	// recorded), where WorkCounted: in a run with a repeated-kill phase.
	// A rerun whose earlier attempt was killed before its work finished
	// is not one.
	WorkTwice    int64   `json:"work_twice"`
	WorkDone     int64   `json:"work_done"` // jobs whose work finished at least once
	WorkCounted  bool    `json:"work_counted"`
	Unfinished   int64   `json:"unfinished"`
	Foreign      int64   `json:"foreign_rows"`
	DrainSeconds float64 `json:"drain_s"`
	Drained      bool    `json:"drained"`
	Err          string  `json:"error,omitempty"`
}

// workTwice is WorkTwice, or "-" where it was not counted.
func (r RunResult) workTwice() string {
	if !r.WorkCounted {
		return "-"
	}
	return fmt.Sprint(r.WorkTwice)
}

// Report is a whole invocation.
type Report struct {
	Config     Config      `json:"config"`
	Started    time.Time   `json:"started"`
	LoadStart  string      `json:"load_average_start"`
	LoadEnd    string      `json:"load_average_end"`
	GoVersion  string      `json:"go"`
	GOMAXPROCS int         `json:"gomaxprocs"`
	Server     string      `json:"server"`
	Runs       []RunResult `json:"runs"`
}

// Run runs every system at every worker count through cfg's phases,
// printing progress to logw, and returns the report.
func Run(ctx context.Context, cfg Config, logw io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg, Started: time.Now(), LoadStart: loadAverage(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	pcfg, err := pgxpool.ParseConfig(withAppName(cfg.URL, "loadbench-observer"))
	if err != nil {
		return nil, fmt.Errorf("parse URL: %w", err)
	}
	pcfg.MaxConns = 8
	admin, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer admin.Close()
	var av, sv string
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('autovacuum')").Scan(&sv, &av); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	rep.Server = "PostgreSQL " + sv + ", autovacuum " + av
	fmt.Fprintf(logw, "# loadbench: %s; load average %s\n", rep.Server, rep.LoadStart)
	for _, w := range cfg.Workers {
		for _, sys := range cfg.Systems {
			r := runOne(ctx, cfg, sys, w, admin, logw)
			rep.Runs = append(rep.Runs, r)
			if r.Err != "" {
				fmt.Fprintf(logw, "# %s workers=%d: %s\n", sys, w, r.Err)
			}
			if ctx.Err() != nil {
				rep.LoadEnd = loadAverage()
				return rep, ctx.Err()
			}
		}
	}
	rep.LoadEnd = loadAverage()
	return rep, nil
}

// runOne runs one system at one worker count.
func runOne(ctx context.Context, cfg Config, sys System, workers int, admin *pgxpool.Pool, logw io.Writer) (r RunResult) {
	r = RunResult{System: sys, Workers: workers}
	fail := func(err error) RunResult {
		r.Err = err.Error()
		return r
	}
	t, err := openTarget(ctx, cfg, sys, admin)
	if err != nil {
		return fail(err)
	}
	r.Schema = t.schema
	defer func() {
		t.close()
		if cfg.Keep {
			fmt.Fprintf(logw, "# %s workers=%d: schema %s kept\n", sys, workers, t.schema)
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := t.drop(dctx, admin); err != nil {
			fmt.Fprintf(logw, "# drop schema %s: %v\n", t.schema, err)
		}
	}()

	col := &collector{}
	prod := newProducer(cfg, t, col.startedJobs, logw)
	wp := &workerProc{spec: t.workerSpec(cfg, workers), col: col, profile: cfg.ProfileDir, name: fmt.Sprintf("%s-w%d", sys, workers)}
	if cfg.hasPhase(RepeatedKill) {
		// Only where a process is killed can work finish twice: the
		// count costs a write per job and a map entry per job.
		wp.spec.Finished, wp.fin = true, newFinishedWork()
	}
	if err := wp.start(); err != nil {
		return fail(err)
	}
	workerUp := true
	defer func() {
		if workerUp {
			wp.kill()
		}
	}()

	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	var bg sync.WaitGroup
	inserters := 1
	if cfg.Depth > 0 {
		inserters = cfg.Inserters
	}
	bg.Add(1 + inserters)
	for range inserters {
		go func() { defer bg.Done(); prod.run(pctx) }()
	}
	go func() {
		defer bg.Done()
		prod.pollDepth(pctx, func(ctx context.Context) (n int64, err error) {
			err = admin.QueryRow(ctx, t.depthSQL).Scan(&n)
			return n, err
		}, cfg.DepthPoll)
	}()
	if cfg.VacuumEvery > 0 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for pctx.Err() == nil {
				sleepCtx(pctx, cfg.VacuumEvery)
				if pctx.Err() == nil {
					_, _ = admin.Exec(pctx, "VACUUM "+t.qualified)
				}
			}
		}()
	}

	obs := newObserver(admin, t, col, prod)
	fmt.Fprintf(logw, "# %s workers=%d: schema %s, warmup %v\n", sys, workers, t.schema, cfg.Warmup)
	sleepCtx(ctx, cfg.Warmup)
	env := faultEnv{cfg: cfg, admin: admin, t: t, worker: wp, restart: wp.start}
	var baseline *PhaseResult
	for _, ph := range cfg.Phases {
		if ctx.Err() != nil {
			break
		}
		pr, err := runPhase(ctx, cfg, ph, env, obs, prod, col, baseline, logw)
		if err != nil {
			stopProducer()
			bg.Wait()
			return fail(fmt.Errorf("phase %s: %w", ph.Kind, err))
		}
		r.Phases = append(r.Phases, pr)
		if ph.Kind == Clean && baseline == nil {
			baseline = &r.Phases[len(r.Phases)-1]
		}
	}
	stopProducer()
	bg.Wait()

	// Drain, stop the workers, and check every job.
	t0 := time.Now()
	dctx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	defer cancel()
	for {
		var n int64
		err := admin.QueryRow(dctx, t.pendingSQL).Scan(&n)
		if err == nil && n == 0 {
			r.Drained = true
			break
		}
		if dctx.Err() != nil {
			break
		}
		sleepCtx(dctx, 250*time.Millisecond)
	}
	r.DrainSeconds = time.Since(t0).Seconds()
	workerUp = false
	if err := wp.stop(time.Minute); err != nil {
		r.Err = err.Error()
	}
	if err := verify(context.WithoutCancel(ctx), admin, t, prod, &r); err != nil {
		return fail(fmt.Errorf("verify: %w", err))
	}
	if wp.fin != nil {
		r.WorkCounted = true
		r.WorkDone, r.WorkTwice = wp.fin.counts()
	}
	fmt.Fprintf(logw, "# %s workers=%d: produced %d, lost %d, duplicate completions %d, reruns %d (work done twice %s), unfinished %d (drain %.1fs)\n",
		sys, workers, r.Produced, r.Lost, r.DupCompleted, r.Reruns, r.workTwice(), r.Unfinished, r.DrainSeconds)
	if r.Unfinished > 0 {
		showUnfinished(context.WithoutCancel(ctx), admin, t, sys, workers, logw)
	}
	return r
}

// showUnfinished logs the first few jobs the drain left unfinished, each
// row as JSON (its state, attempts and errors say why).
func showUnfinished(ctx context.Context, admin *pgxpool.Pool, t *target, sys System, workers int, logw io.Writer) {
	rows, err := admin.Query(ctx, `SELECT left(row_to_json(j)::text, 1500) FROM `+t.qualified+` j WHERE state::text <> 'completed' ORDER BY id LIMIT 5`)
	if err != nil {
		fmt.Fprintf(logw, "# %s workers=%d: the unfinished jobs could not be read: %v\n", sys, workers, err)
		return
	}
	js, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		fmt.Fprintf(logw, "# %s workers=%d: the unfinished jobs could not be read: %v\n", sys, workers, err)
		return
	}
	for _, j := range js {
		fmt.Fprintf(logw, "# %s workers=%d: unfinished: %s\n", sys, workers, j)
	}
}

// runPhase runs one phase and, after a fault, its recovery window.
func runPhase(ctx context.Context, cfg Config, ph Phase, env faultEnv, obs *observer, prod *producer, col *collector,
	baseline *PhaseResult, logw io.Writer) (PhaseResult, error) {
	pr := PhaseResult{Phase: ph.Kind, Factor: 1, RecoverySeconds: -1}
	if ph.Kind == HighLoad {
		pr.Factor = HighLoadFactor
	}
	prod.setFactor(pr.Factor)
	f, err := startFault(ctx, ph.Kind, env)
	if err != nil {
		return pr, err
	}
	obs.readBackends(ctx)
	obs.takeWaits()
	obs.mark(ctx)
	col.takePhase()
	cpuW0, cpuDB0, cpuProd0 := col.cpu(), obs.backendCPU, obs.prodDB
	cnt0 := obs.counters(ctx)
	done0, _ := col.takeWindow()
	ins0, fail0 := prod.inserted.Load(), prod.failed.Load()
	prod.takeInserts()
	start := time.Now()
	pr.Samples = sampleFor(ctx, obs, start, ph.Duration, cfg.Verbose, logw, string(ph.Kind))
	obs.readBackends(ctx)
	cnt1 := obs.counters(ctx)
	done1, _ := col.takeWindow()
	obs.lastDone = done1 // the window histogram's rest is dropped with the phase's edge
	pr.Seconds = time.Since(start).Seconds()
	if f != nil {
		desc, err := f.stop()
		pr.Fault = desc
		if err != nil {
			pr.Fault += "; error: " + err.Error()
		}
	}
	prod.setFactor(1)
	pr.Completed = done1 - done0
	pr.Produced = prod.inserted.Load() - ins0
	pr.InsertErrors = prod.failed.Load() - fail0
	ins := prod.takeInserts()
	pr.InsertP50, pr.InsertP99 = ms(ins.quantile(0.5)), ms(ins.quantile(0.99))
	ph1 := col.takePhase()
	pr.PhaseP50, pr.PhaseP99, pr.PickupMaxMs = ms(ph1.quantile(0.5)), ms(ph1.quantile(0.99)), ms(ph1.max)
	if pr.Completed > 0 {
		pr.WorkerCPUPer1k = (col.cpu() - cpuW0).Seconds() / float64(pr.Completed) * 1000
		pr.DBCPUPer1k = (obs.backendCPU - cpuDB0).Seconds() / float64(pr.Completed) * 1000
		pr.ProducerDBCPUPer1k = (obs.prodDB - cpuProd0).Seconds() / float64(pr.Completed) * 1000
	}
	pr.Waits = obs.takeWaits()
	pr.ClaimScans = cnt1.claimScans - cnt0.claimScans
	if pr.ClaimScans > 0 {
		pr.EntriesPerScan = float64(cnt1.claimEntries-cnt0.claimEntries) / float64(pr.ClaimScans)
		pr.BlocksPerScan = float64(cnt1.claimBlocks-cnt0.claimBlocks) / float64(pr.ClaimScans)
	}
	if pr.Completed > 0 {
		pr.HeapBlocksPerJob = float64(cnt1.heapBlocks-cnt0.heapBlocks) / float64(pr.Completed)
		pr.IndexBlocksPerJob = float64(cnt1.indexBlocks-cnt0.indexBlocks) / float64(pr.Completed)
		pr.UpdatesPerJob = float64(cnt1.updates-cnt0.updates) / float64(pr.Completed)
	}
	if upd := cnt1.updates - cnt0.updates; upd > 0 {
		pr.HOTPercent = 100 * float64(cnt1.hotUpdates-cnt0.hotUpdates) / float64(upd)
	}
	summarize(&pr)
	fmt.Fprintf(logw, "# %s workers=%d %s: %.0f jobs/s, pickup p50 %.1f p99 %.1f ms, depth %.0f, dead %d, %s (load %s)\n",
		env.t.system, env.worker.spec.Workers, ph.Kind, pr.Rate, pr.P50.Median, pr.P99.Median, pr.Depth.Median, pr.DeadEnd, pr.Fault, loadAverage())

	if ph.Fault() && cfg.Recovery > 0 {
		obs.mark(ctx)
		rstart := time.Now()
		pr.RecoverySamples = sampleFor(ctx, obs, rstart, cfg.Recovery, cfg.Verbose, logw, string(ph.Kind)+"/recovery")
		var after []float64
		for _, s := range pr.RecoverySamples {
			if s.P50 > 0 || s.P99 > 0 {
				after = append(after, s.P99)
			}
		}
		pr.AfterP99 = stat(after)
		col.takePhase()
		if baseline != nil {
			pr.RecoverySeconds, pr.Recovered = recoveryTime(cfg, baseline, pr.RecoverySamples)
		}
	}
	return pr, nil
}

// sampleFor samples once a second for d.
func sampleFor(ctx context.Context, obs *observer, start time.Time, d time.Duration, verbose bool, logw io.Writer, label string) []sample {
	var out []sample
	for i := 1; ; i++ {
		next := start.Add(time.Duration(i) * time.Second)
		end := start.Add(d)
		if next.After(end) {
			next = end
		}
		sleepCtx(ctx, time.Until(next))
		if ctx.Err() != nil {
			return out
		}
		s := obs.sample(ctx, start)
		out = append(out, s)
		if verbose {
			fmt.Fprintf(logw, "  %s %5.1fs %7.0f jobs/s p50 %7.1f p99 %7.1f ms depth %6d dead %8d live %8d size %6.1f MB claims %5d x %6.1f entries %6.1f blocks\n",
				label, s.At, s.Rate, s.P50, s.P99, s.Depth, s.Dead, s.Live, float64(s.Size)/1e6, s.Claims, s.Entries, s.Blocks)
		}
		if !next.Before(end) {
			return out
		}
	}
}

// summarize fills the phase's medians and maxima from its samples. A last
// sample shorter than half a second is left out of the rates.
func summarize(pr *PhaseResult) {
	var rates, p50, p95, p99, depth []float64
	prev := 0.0
	for _, s := range pr.Samples {
		if s.At-prev >= 0.5 {
			rates = append(rates, s.Rate)
		}
		prev = s.At
		if s.P50 > 0 || s.P99 > 0 {
			p50, p95, p99 = append(p50, s.P50), append(p95, s.P95), append(p99, s.P99)
		}
		depth = append(depth, float64(s.Depth))
		pr.DeadMax = max(pr.DeadMax, s.Dead)
	}
	pr.Rate = stat(rates).Median
	if len(rates) > 0 {
		pr.RateMin = slices.Min(rates)
	}
	pr.P50, pr.P95, pr.P99, pr.Depth = stat(p50), stat(p95), stat(p99), stat(depth)
	if n := len(pr.Samples); n > 0 {
		last := pr.Samples[n-1]
		pr.DeadEnd, pr.LiveEnd, pr.SizeEnd = last.Dead, last.Live, last.Size
	}
}

func stat(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: m, Max: s[len(s)-1]}
}

// recoveryTime returns the time from the end of the fault to the first
// sample back at the baseline: holding a depth, a completion rate of at
// least 90% of the clean phase's median; at a fixed rate, a depth no more
// than twice the clean phase's median (or two batches). It reports false
// when no sample of the window is.
func recoveryTime(cfg Config, base *PhaseResult, ss []sample) (float64, bool) {
	for _, s := range ss {
		ok := false
		if cfg.Depth > 0 {
			ok = s.Rate >= 0.9*base.Rate
		} else {
			ok = float64(s.Depth) <= math.Max(2*base.Depth.Median, float64(2*cfg.Batch))
		}
		if ok {
			return s.At, true
		}
	}
	if n := len(ss); n > 0 {
		return ss[n-1].At, false
	}
	return 0, false
}

// verify reads every job of the target's table and checks that each
// produced sequence number completed exactly once.
func verify(ctx context.Context, admin *pgxpool.Pool, t *target, prod *producer, r *RunResult) error {
	next, uncertain := prod.seqs()
	c := newSeqCheck(next, uncertain)
	q, err := admin.Query(ctx, t.verifySQL)
	if err != nil {
		return err
	}
	defer q.Close()
	for q.Next() {
		var seq *int64
		var state string
		var attempt int64
		if err := q.Scan(&seq, &state, &attempt); err != nil {
			return err
		}
		c.add(seq, state, attempt)
	}
	if err := q.Err(); err != nil {
		return err
	}
	c.finish(r)
	if r.Produced == 0 {
		return errors.New("no job was produced")
	}
	return nil
}

// seqCheck counts, per sequence number, the rows and completed rows of the
// job table.
type seqCheck struct {
	uncertain []bool  // the insert of the number failed: its row may or may not exist
	rows      []uint8 // saturating at 255
	completed []uint8
	reruns    int64
	unfinish  int64
	foreign   int64
}

func newSeqCheck(next int64, uncertain [][2]int64) *seqCheck {
	c := &seqCheck{uncertain: make([]bool, next), rows: make([]uint8, next), completed: make([]uint8, next)}
	for _, u := range uncertain {
		for s := u[0]; s < u[1]; s++ {
			c.uncertain[s] = true
		}
	}
	return c
}

// add counts one row: its sequence number (nil when it has none), state
// and attempt.
func (c *seqCheck) add(seq *int64, state string, attempt int64) {
	if seq == nil || *seq < 0 || *seq >= int64(len(c.rows)) {
		c.foreign++
		return
	}
	c.rows[*seq] = min(c.rows[*seq], 254) + 1
	if state != "completed" {
		c.unfinish++
		return
	}
	c.completed[*seq] = min(c.completed[*seq], 254) + 1
	if attempt > 1 {
		c.reruns++
	}
}

// finish writes the counts into r.
func (c *seqCheck) finish(r *RunResult) {
	r.Reruns, r.Unfinished, r.Foreign = c.reruns, c.unfinish, c.foreign
	r.Produced, r.NotInserted, r.Lost, r.DupCompleted, r.DupRows = 0, 0, 0, 0, 0
	for s, rows := range c.rows {
		if c.uncertain[s] && rows == 0 {
			r.NotInserted++
			continue
		}
		r.Produced++
		switch done := c.completed[s]; {
		case done == 0:
			r.Lost++
		case done > 1:
			r.DupCompleted += int64(done) - 1
		}
		if rows > 1 {
			r.DupRows += int64(rows) - 1
		}
	}
}
