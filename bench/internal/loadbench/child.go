package loadbench

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/bench/internal/cpuprofile"
	"github.com/weirhq/weir/bench/internal/program"
	"github.com/weirhq/weir/store/postgres"
)

// The environment of a child process: RoleEnv says what it is (RoleWorker
// or RoleBurn), SpecEnv holds a worker's workerSpec as JSON.
const (
	RoleEnv    = "LOADBENCH_ROLE"
	SpecEnv    = "LOADBENCH_WORKER_SPEC"
	RoleWorker = "worker"
	RoleBurn   = "burn"
)

// jobArgs are the arguments of every job: its sequence number, the
// producer's clock when the insert call began (ns since the epoch), and
// padding up to the configured payload.
type jobArgs struct {
	Seq int64  `json:"s"`
	T   int64  `json:"t"`
	Pad string `json:"p"`
}

func (jobArgs) Kind() string { return "loadbench" }

// workerSpec is what a worker process needs to know.
type workerSpec struct {
	System        System        `json:"system"`
	URL           string        `json:"url"`
	Schema        string        `json:"schema"`
	AppName       string        `json:"app_name"`
	Workers       int           `json:"workers"`
	MaxConns      int           `json:"max_conns"`
	Poll          time.Duration `json:"poll"`
	FetchCooldown time.Duration `json:"fetch_cooldown"`
	ClaimCooldown time.Duration `json:"claim_cooldown,omitempty"`
	Work          time.Duration `json:"work"`
	Profile       string        `json:"profile,omitempty"`
	Verbose       bool          `json:"verbose,omitempty"`
	// Finished: each handler writes its job's sequence number to file
	// descriptor 3 (8 bytes, little-endian) once its work is done, before
	// the system records the success; the parent counts work done twice.
	Finished bool `json:"finished,omitempty"`
}

// report is what a worker process writes on its standard output, one JSON
// line about every reportEvery: its handlers' starts and completions
// since it started, their pickup latencies since the last report (histogram
// buckets), and its CPU time (getrusage) since it started.
type report struct {
	Ready   bool        `json:"ready,omitempty"`
	Started int64       `json:"s"`
	Done    int64       `json:"n"`
	Hist    [][2]uint64 `json:"h,omitempty"`
	CPU     int64       `json:"cpu_us"`
}

const reportEvery = 200 * time.Millisecond

// Child runs the role named by RoleEnv and returns the process's exit
// code; the benchmark's main (and its test binary's TestMain) call it
// first when RoleEnv is set.
func Child(role string) int {
	switch role {
	case RoleBurn:
		burn()
		return 0
	case RoleWorker:
		var spec workerSpec
		if err := json.Unmarshal([]byte(os.Getenv(SpecEnv)), &spec); err != nil {
			fmt.Fprintln(os.Stderr, "loadbench worker: spec:", err)
			return 2
		}
		if err := runWorker(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "loadbench worker:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "loadbench: unknown %s %q\n", RoleEnv, role)
	return 2
}

// burn keeps GOMAXPROCS goroutines busy until the process is killed.
func burn() {
	n := runtime.GOMAXPROCS(0)
	var sink [64]uint64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(i + 1)
			for {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				sink[i%len(sink)] = x
			}
		}()
	}
	wg.Wait()
}

// tally is what a worker process's handlers record.
type tally struct {
	mu       sync.Mutex
	hist     histogram
	started  int64
	done     int64
	finished *os.File // workerSpec.Finished: a pipe to the parent, or nil
}

func (t *tally) handle(args jobArgs, work time.Duration) {
	pickup := time.Duration(time.Now().UnixNano() - args.T)
	t.mu.Lock()
	t.started++
	t.mu.Unlock()
	if work > 0 {
		time.Sleep(work)
	}
	if t.finished != nil {
		// One write of 8 bytes, under PIPE_BUF: whole or not at all, even
		// when the process is killed, and in the parent before the
		// success can be recorded.
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(args.Seq))
		_, _ = t.finished.Write(b[:])
	}
	t.mu.Lock()
	t.hist.record(pickup)
	t.done++
	t.mu.Unlock()
}

// take returns a report of the starts and completions so far and the
// histogram since the last take, which it empties.
func (t *tally) take() report {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := report{Started: t.started, Done: t.done, Hist: t.hist.sparse(), CPU: cpuMicros()}
	t.hist.reset()
	return r
}

func cpuMicros() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano()/1e3 + ru.Stime.Nano()/1e3
}

// runWorker works spec's system's queue until in reaches its end (the
// benchmark closed it), then stops the client and returns. It reports on
// out as report describes.
func runWorker(spec workerSpec, in io.Reader, out io.Writer) (err error) {
	stopProfile, err := cpuprofile.Start(spec.Profile)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()

	ctx := context.Background()
	logger := program.Logger(spec.Verbose)
	t := &tally{}
	if spec.Finished {
		t.finished = os.NewFile(3, "finished")
	}
	var stop func(context.Context) error
	switch spec.System {
	case Weir:
		stop, err = startWeirWorker(ctx, spec, t, logger)
	case River:
		stop, err = startRiverWorker(ctx, spec, t, logger)
	default:
		err = fmt.Errorf("unknown system %q", spec.System)
	}
	if err != nil {
		return err
	}

	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	var wmu sync.Mutex
	send := func(r report) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = enc.Encode(r)
		_ = w.Flush()
	}
	send(report{Ready: true, CPU: cpuMicros()})
	quit := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		tk := time.NewTicker(reportEvery)
		defer tk.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tk.C:
				send(t.take())
			}
		}
	}()
	_, _ = io.Copy(io.Discard, in) // until the benchmark closes our stdin
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = stop(sctx)
	close(quit)
	<-reported
	send(t.take())
	return err
}

func startWeirWorker(ctx context.Context, spec workerSpec, t *tally, logger *slog.Logger) (func(context.Context) error, error) {
	st, err := postgres.Open(ctx, postgres.Config{URL: withAppName(spec.URL, spec.AppName), Schema: spec.Schema, MaxConns: int32(spec.MaxConns)})
	if err != nil {
		return nil, fmt.Errorf("weir: open store: %w", err)
	}
	workers := weir.NewWorkers()
	if err := weir.AddWorker(workers, weir.WorkFunc(func(_ context.Context, j *weir.Job[jobArgs]) error {
		t.handle(j.Args, spec.Work)
		return nil
	}), weir.KindConfig{}); err != nil {
		st.Close()
		return nil, err
	}
	client, err := weir.NewClient(weir.Config{
		Store:         st,
		Workers:       workers,
		Queues:        map[string]weir.QueueConfig{weir.DefaultQueue: {MaxWorkers: spec.Workers}},
		PollEvery:     spec.Poll,
		ClaimCooldown: spec.ClaimCooldown,
		// Stable across restarts: a restarted worker takes back at once
		// the jobs its killed predecessor held.
		ID:     "loadbench-worker",
		Logger: logger,
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	return startClient(ctx, "weir", client.Start, client.Stop, func() { st.Close() })
}

// startClient starts a worker process's client and returns the function
// that stops it; closeDB closes the client's database, when the client
// fails to start or once it has stopped.
func startClient(ctx context.Context, system string, start, stop func(context.Context) error, closeDB func()) (func(context.Context) error, error) {
	if err := start(ctx); err != nil {
		closeDB()
		return nil, fmt.Errorf("%s: start: %w", system, err)
	}
	return func(ctx context.Context) error {
		err := stop(ctx)
		closeDB()
		return err
	}, nil
}

// riverWorker is River's handler.
type riverWorker struct {
	river.WorkerDefaults[jobArgs]
	t    *tally
	work time.Duration
}

func (w *riverWorker) Work(_ context.Context, j *river.Job[jobArgs]) error {
	w.t.handle(j.Args, w.work)
	return nil
}

// River's timeouts: a job runs for 1 ms, so a job still running after
// riverRescueAfter was left by a killed worker; River's rescuer looks for
// such jobs every 30 s (not configurable).
const (
	riverJobTimeout  = 5 * time.Second
	riverRescueAfter = 10 * time.Second
)

func startRiverWorker(ctx context.Context, spec workerSpec, t *tally, logger *slog.Logger) (func(context.Context) error, error) {
	pool, err := riverPool(ctx, spec.URL, spec.AppName, spec.Schema, spec.MaxConns)
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &riverWorker{t: t, work: spec.Work}); err != nil {
		pool.Close()
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: spec.Workers}},
		Workers:              workers,
		FetchCooldown:        spec.FetchCooldown,
		FetchPollInterval:    spec.Poll,
		JobTimeout:           riverJobTimeout,
		RescueStuckJobsAfter: riverRescueAfter,
		Schema:               spec.Schema,
		Logger:               logger,
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("river: new client: %w", err)
	}
	return startClient(ctx, "river", client.Start, client.Stop, pool.Close)
}

// riverPool opens a pool whose connections are named appName and search
// schema first.
func riverPool(ctx context.Context, url, appName, schema string, maxConns int) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(withAppName(url, appName))
	if err != nil {
		return nil, fmt.Errorf("river: parse URL: %w", err)
	}
	pcfg.MaxConns = int32(maxConns)
	pcfg.ConnConfig.RuntimeParams["search_path"] = quoteIdent(schema)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("river: open pool: %w", err)
	}
	return pool, nil
}
