// Package chaos is weir's crash harness: it runs the workload of Worker in
// a child process, kills the child with SIGKILL at seeded random moments
// and at named crash points, starts it again, and at the end checks that
// every document was processed, each effect happened once, and nothing
// was left behind. `weir chaos` runs it.
//
// The workload's NATS server runs outside the killed child, in the
// harness's process (or is an external server), as a broker runs on a
// machine of its own: what a killed worker acked stays acked, so a
// consumer that acks before it commits loses messages, which the checker
// reports (Config.AckBeforeCommit plants that bug to prove it).
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/faultproxy"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
)

// Config is a run of the harness.
type Config struct {
	// Where is the workload's database, as the harness reaches it, and
	// Dir the run's directory, required, which must be empty or missing.
	// A PostgreSQL schema must hold no earlier run. Its NATS and Topics
	// are left empty: Run sets them, from Broker.
	Where
	// WorkerPostgres, when set, is the URL the worker dials instead of
	// Postgres: a fault proxy in front of it, say.
	WorkerPostgres string
	// Docs is the number of documents; every PoisonEvery-th is poison
	// (0: none). Pages is each document's page count.
	Docs, PoisonEvery, Pages int
	// Kills is how many times the worker is killed before the last run.
	Kills int
	// Faults is how many times Fault disrupts the database while one
	// worker runs, never killed nor restarted, until every document has
	// ended; Kills must then be 0. Fault returns what it did once the
	// disruption is over (the connections restored, the server back).
	Faults int
	Fault  func(ctx context.Context, rng *rand.Rand) (string, error)
	// Points, when set, are the crash points the kills use: every kill is
	// at one of them, after a seeded count of passes (and, if the point is
	// not reached within 5 s, a plain kill). Empty: half the kills are at
	// one of weir's crash points, the others after a random time.
	Points []string
	// Broker is where the NATS server that carries the workload's
	// messages runs:
	//   - BrokerHarness (the default, ""): in the harness's process, its
	//     streams kept in Dir/nats; the workers connect to it. A killed
	//     worker's acks that reached the server stay acked, as on a broker
	//     of its own machine, so a consumer that acks before it commits
	//     loses messages, which the checker finds.
	//   - BrokerWorker: embedded in each worker, in Dir/nats, dying with
	//     it: weir's single-machine setup, whose recovery this checks. The
	//     server's restart also forgets the acks it had not yet written
	//     to disk, which hides a consumer that acks too early.
	//   - a nats:// URL: that server, with JetStream. The run's topics and
	//     streams are its own (named by a random word), deleted at the end.
	Broker string
	// AckBeforeCommit runs the workers with a deliberately wrong
	// consumer of the documents, which acks before its transaction
	// commits (see WorkerConfig), to check that the harness catches it:
	// such a run must report lost documents. Its crash point,
	// consumer.after-early-ack, joins the random kills' points.
	AckBeforeCommit bool
	// Seed makes the run's schedule of kills or faults; the same seed,
	// the same schedule.
	Seed uint64
	// Worker returns the command that runs Worker with w in a child
	// process (`weir chaos-worker`).
	Worker func(w WorkerConfig) *exec.Cmd
	// Finish bounds the last run, which must end every document.
	Finish time.Duration
	// Out receives the progress and the result.
	Out io.Writer
}

// The places Config.Broker names.
const (
	BrokerHarness = "harness"
	BrokerWorker  = "worker"
)

// point is a named crash point a kill can use, with how many passes to
// let by at most: the relay passes its points once per batch, the others
// once per page, message or transition.
type point struct {
	name   string
	passes int
}

// points are weir's crash points that the workload passes.
var points = []point{
	{crashpoint.OutboxBeforePublish, 3},
	{crashpoint.OutboxAfterPublish, 3},
	{crashpoint.LedgerAfterEffect, 15},
	{crashpoint.ConsumerBeforeAck, 10},
	{crashpoint.WorkflowMidTransition, 10},
}

// earlyAck is the crash point of the consumer that acks first
// (Config.AckBeforeCommit).
var earlyAck = point{crashpoint.ConsumerAfterEarlyAck, 10}

// allPoints are the points Config.Points may name.
func allPoints() []point { return append(slices.Clone(points), earlyAck) }

// PointNames are the crash points Config.Points may name.
func PointNames() []string {
	var names []string
	for _, p := range allPoints() {
		names = append(names, p.name)
	}
	return names
}

// killPoints returns the points cfg's kills use, and whether every kill
// uses one; or an error naming a point that is not one.
func (cfg Config) killPoints() ([]point, bool, error) {
	if len(cfg.Points) == 0 {
		if cfg.AckBeforeCommit {
			return allPoints(), false, nil
		}
		return points, false, nil
	}
	var out []point
	for _, name := range cfg.Points {
		i := slices.IndexFunc(allPoints(), func(p point) bool { return p.name == name })
		if i < 0 {
			return nil, false, fmt.Errorf("chaos: Config.Points: %q is not a crash point of the workload (want one of %s)", name, strings.Join(PointNames(), ", "))
		}
		out = append(out, allPoints()[i])
	}
	return out, true, nil
}

// Run runs the harness and returns its result; a result with anything
// lost, duplicated or orphaned is an error too.
func Run(ctx context.Context, cfg Config) (Result, error) {
	switch {
	case cfg.Dir == "" || cfg.Worker == nil || cfg.Out == nil:
		return Result{}, errors.New("chaos: Config.Dir, Worker and Out are required")
	case cfg.Docs < 1 || cfg.Pages < 1 || cfg.Kills < 0 || cfg.Faults < 0 || cfg.PoisonEvery < 0:
		return Result{}, fmt.Errorf("chaos: docs %d and pages %d must be at least 1; kills %d, faults %d and poison-every %d not negative",
			cfg.Docs, cfg.Pages, cfg.Kills, cfg.Faults, cfg.PoisonEvery)
	case cfg.Faults > 0 && cfg.Kills > 0:
		return Result{}, errors.New("chaos: a run has kills or database faults, not both")
	case cfg.Faults > 0 && cfg.Fault == nil:
		return Result{}, errors.New("chaos: Config.Fault is required with faults")
	case cfg.Faults > 0 && len(cfg.Points) > 0:
		return Result{}, errors.New("chaos: Config.Points are the kills' crash points; a run with database faults has no kills")
	case CheckBroker(cfg.Broker) != nil:
		return Result{}, fmt.Errorf("chaos: Config.Broker %w", CheckBroker(cfg.Broker))
	case cfg.NATS != "" || cfg.Topics != "":
		return Result{}, errors.New("chaos: Config.Where.NATS and Topics are left empty: Run sets them, from Config.Broker")
	}
	if _, _, err := cfg.killPoints(); err != nil {
		return Result{}, err
	}
	if cfg.Finish == 0 {
		cfg.Finish = 2 * time.Minute
	}
	what := fmt.Sprintf("%d kills", cfg.Kills)
	if cfg.Faults > 0 {
		what = fmt.Sprintf("%d database faults", cfg.Faults)
	}
	where := "SQLite"
	if cfg.Postgres != "" {
		where = "PostgreSQL schema " + cfg.schema()
	}
	h, err := prepare(ctx, cfg.Where)
	if err != nil {
		return Result{}, err
	}
	defer h.Close()
	brokerWhere, stopBroker, err := startBroker(ctx, &cfg)
	if err != nil {
		return Result{}, err
	}
	defer stopBroker()
	if cfg.AckBeforeCommit {
		brokerWhere += "; the documents consumed by a consumer that acks before it commits (a planted bug)"
	}
	fmt.Fprintf(cfg.Out, "seed %d: %d documents (%d pages each, every %d poison), %s, on %s, NATS %s, in %s\n",
		cfg.Seed, cfg.Docs, cfg.Pages, cfg.PoisonEvery, what, where, brokerWhere, cfg.Dir)
	// The documents arrive in waves, one before each killed run or fault,
	// so that every kill or fault finds work in flight.
	wave := cfg.Docs
	if n := max(cfg.Kills, cfg.Faults); n > 0 {
		wave = max(1, (cfg.Docs+n-1)/n)
	}
	seeded := 0
	addWave := func() error {
		n := min(wave, cfg.Docs-seeded)
		if n == 0 {
			return nil
		}
		err := seed(ctx, h, cfg, seeded, seeded+n)
		seeded += n
		return err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636861))
	res := Result{}
	if cfg.Faults > 0 {
		return runFaults(ctx, cfg, h, rng, addWave)
	}
	for tries := 0; res.Kills < cfg.Kills; tries++ {
		if tries > 3*cfg.Kills+10 {
			return res, fmt.Errorf("chaos: %d starts made only %d kills", tries, res.Kills)
		}
		if err := addWave(); err != nil {
			return res, err
		}
		killed, how, err := runOnce(ctx, cfg, rng)
		if err != nil {
			return res, err
		}
		if killed {
			res.Kills++
			fmt.Fprintf(cfg.Out, "kill %d: %s\n", res.Kills, how)
		}
	}
	if seeded < cfg.Docs {
		if err := seed(ctx, h, cfg, seeded, cfg.Docs); err != nil {
			return res, err
		}
	}
	w := startWorker(cfg)
	if err := w.err; err != nil {
		return res, err
	}
	if err := w.finish(ctx, cfg, h); err != nil {
		return res, err
	}
	return check(ctx, cfg, h, res)
}

// runFaults runs one worker while cfg.Fault disrupts the database
// cfg.Faults times, a wave of documents before each, then lets the same
// worker finish every document, and checks.
func runFaults(ctx context.Context, cfg Config, h *db, rng *rand.Rand, addWave func() error) (Result, error) {
	res := Result{}
	w := startWorker(cfg)
	if w.err != nil {
		return res, w.err
	}
	for res.Faults < cfg.Faults {
		if err := addWave(); err != nil {
			w.stop()
			return res, err
		}
		select {
		case err := <-w.done:
			return res, fmt.Errorf("chaos: the worker ended during the faults: %v", err)
		case <-ctx.Done():
			w.stop()
			return res, ctx.Err()
		case <-time.After(time.Duration(200+rng.IntN(1000)) * time.Millisecond):
		}
		how, err := cfg.Fault(ctx, rng)
		if err != nil {
			w.stop()
			return res, fmt.Errorf("chaos: fault %d: %w", res.Faults+1, err)
		}
		res.Faults++
		fmt.Fprintf(cfg.Out, "fault %d: %s\n", res.Faults, how)
	}
	if err := addWave(); err != nil { // what the waves left, if any
		w.stop()
		return res, err
	}
	if err := w.finish(ctx, cfg, h); err != nil {
		return res, err
	}
	return check(ctx, cfg, h, res)
}

// schema is the PostgreSQL schema of the run.
func (w Where) schema() string {
	if w.Schema == "" {
		return defaultSchema
	}
	return w.Schema
}

// workerConfig is what the worker is given: where it finds the database
// and the broker, and whether it acks first.
func (cfg Config) workerConfig() WorkerConfig {
	w := cfg.Where
	if w.Postgres != "" && cfg.WorkerPostgres != "" {
		w.Postgres = cfg.WorkerPostgres
	}
	return WorkerConfig{Where: w, AckBeforeCommit: cfg.AckBeforeCommit}
}

// runOnce starts the worker and kills it: at a named crash point with a
// random count (half the time), or after a random time. It reports
// whether the worker was killed (a crash point the worker never reached
// lets it run until the time limit, then it is killed anyway) and how.
func runOnce(ctx context.Context, cfg Config, rng *rand.Rand) (bool, string, error) {
	cmd := cfg.Worker(cfg.workerConfig())
	how := ""
	wait := time.Duration(50+rng.IntN(1500)) * time.Millisecond
	kps, always, err := cfg.killPoints()
	if err != nil {
		return false, "", err
	}
	if always || rng.IntN(2) == 0 {
		p := kps[rng.IntN(len(kps))]
		point := fmt.Sprintf("%s:%d", p.name, rng.IntN(p.passes))
		cmd.Env = append(cmd.Environ(), crashpoint.Env+"="+point)
		how = "at " + point
		wait = 5 * time.Second
	}
	if err := cmd.Start(); err != nil {
		return false, "", fmt.Errorf("chaos: start the worker: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if crashpoint.Killed(err) {
			return true, how, nil
		}
		return false, "", fmt.Errorf("chaos: the worker ended by itself: %v", err)
	case <-time.After(wait):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if how == "" {
			how = fmt.Sprintf("after %v", wait)
		} else {
			how += fmt.Sprintf(" (not reached; after %v)", wait)
		}
		return true, how, nil
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return false, "", ctx.Err()
	}
}

// worker is a running worker process.
type worker struct {
	cmd  *exec.Cmd
	done chan error // its exit
	err  error      // why it did not start
}

// startWorker starts a worker that no crash point stops.
func startWorker(cfg Config) *worker {
	w := &worker{cmd: cfg.Worker(cfg.workerConfig()), done: make(chan error, 1)}
	if err := w.cmd.Start(); err != nil {
		w.err = fmt.Errorf("chaos: start the worker: %w", err)
		return w
	}
	go func() { w.done <- w.cmd.Wait() }()
	return w
}

// stop stops the worker with SIGTERM, and SIGKILL if it does not end
// within 30 s.
func (w *worker) stop() error {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				return nil // stopped before it could catch the signal
			}
		}
		return err
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.done
		return errors.New("chaos: the worker did not stop within 30 s of SIGTERM")
	}
}

// finish lets the worker run until every document's workflow has ended
// and its end is notified, or cfg.Finish has passed, then stops it.
func (w *worker) finish(ctx context.Context, cfg Config, h *db) error {
	deadline := time.Now().Add(cfg.Finish)
	for {
		left, err := unfinished(ctx, h)
		switch {
		case err != nil && time.Now().After(deadline):
			_ = w.stop()
			return fmt.Errorf("chaos: count the unfinished documents: %w", err)
		case err != nil:
			// The harness's own connection may have been cut too;
			// it asks again.
		case left == 0:
			return w.stop()
		case time.Now().After(deadline):
			_ = w.stop()
			fmt.Fprintf(cfg.Out, "the last run did not finish within %v: %d documents left\n", cfg.Finish, left)
			return nil // the check reports them lost
		}
		select {
		case err := <-w.done:
			return fmt.Errorf("chaos: the worker ended by itself: %v", err)
		case <-ctx.Done():
			_ = w.stop()
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// prepare makes the run's directory, which must be empty or missing, and
// opens the workload's database, which must hold no documents.
func prepare(ctx context.Context, where Where) (*db, error) {
	if entries, err := os.ReadDir(where.Dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("chaos: %s is not empty", where.Dir)
	}
	if err := os.MkdirAll(where.Dir, 0o755); err != nil {
		return nil, err
	}
	h, err := openDB(ctx, where)
	if err != nil {
		return nil, err
	}
	var n int
	if err := h.SQL.QueryRowContext(ctx, `SELECT count(*) FROM chaos_docs`).Scan(&n); err != nil || n > 0 {
		h.Close()
		if err == nil {
			err = fmt.Errorf("chaos: the database holds %d documents of an earlier run; use a new schema", n)
		}
		return nil, err
	}
	return h, nil
}

// seed adds the documents from (0-based) to to, each with the message
// that announces it in the outbox, in the same transaction; a transaction
// that fails (a connection lost to a fault) is tried again.
func seed(ctx context.Context, h *db, cfg Config, from, to int) error {
	for i := from; i < to; i += 100 {
		add := func(tx appdb.Tx, ex store.Executor) error {
			for j := i; j < min(i+100, to); j++ {
				id := fmt.Sprintf("doc-%d", j+1)
				poison := cfg.PoisonEvery > 0 && (j+1)%cfg.PoisonEvery == 0
				if _, err := tx.Exec(ctx, `INSERT INTO chaos_docs (id, poison, pages) VALUES ($1, $2, $3)`, id, poison, cfg.Pages); err != nil {
					return err
				}
				if _, err := outbox.Add(ctx, ex, time.Now(), store.OutboxMessage{Topic: cfg.docsTopic(), Key: id, Payload: []byte(id)}); err != nil {
					return err
				}
			}
			return nil
		}
		var err error
		for try := 0; try < 5; try++ {
			if err = h.runTx(ctx, add); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("chaos: seed: %w", err)
		}
	}
	return nil
}

// CutConnections is a Fault that cuts every connection through p, and
// refuses new ones, for 50 ms to 1.5 s, then restores them.
func CutConnections(p *faultproxy.Proxy) func(context.Context, *rand.Rand) (string, error) {
	return func(ctx context.Context, rng *rand.Rand) (string, error) {
		d := time.Duration(50+rng.IntN(1450)) * time.Millisecond
		p.Cut()
		defer p.Restore()
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return fmt.Sprintf("connections to PostgreSQL cut for %v", d), nil
	}
}
