// Package chaos is weir's crash harness: it runs the workload of Worker in
// a child process, kills the child with SIGKILL at seeded random moments
// and at named crash points, starts it again, and at the end checks that
// every document was processed, each effect happened once, and nothing
// was left behind. `weir chaos` runs it.
package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/store"
)

// Config is a run of the harness.
type Config struct {
	// Dir holds the run's database, broker, blobs and index. Required;
	// it must be empty or missing.
	Dir string
	// Docs is the number of documents; every PoisonEvery-th is poison
	// (0: none). Pages is each document's page count.
	Docs, PoisonEvery, Pages int
	// Kills is how many times the worker is killed before the last run.
	Kills int
	// Seed makes the run's kill schedule; the same seed, the same
	// schedule.
	Seed uint64
	// Worker returns the command that runs Worker on dir in a child
	// process (`weir chaos-worker dir`).
	Worker func(dir string) *exec.Cmd
	// Finish bounds the last run, which must end every document.
	Finish time.Duration
	// Out receives the progress and the result.
	Out io.Writer
}

// points are the named crash points a kill can use, each with how many
// passes to let by at most: the relay passes its points once per batch,
// the others once per page, message or transition.
var points = []struct {
	name   string
	passes int
}{
	{crashpoint.OutboxBeforePublish, 3},
	{crashpoint.OutboxAfterPublish, 3},
	{crashpoint.LedgerAfterEffect, 15},
	{crashpoint.ConsumerBeforeAck, 10},
	{crashpoint.WorkflowMidTransition, 10},
}

// Run runs the harness and returns its result; a result with anything
// lost, duplicated or orphaned is an error too.
func Run(ctx context.Context, cfg Config) (Result, error) {
	switch {
	case cfg.Dir == "" || cfg.Worker == nil || cfg.Out == nil:
		return Result{}, errors.New("chaos: Config.Dir, Worker and Out are required")
	case cfg.Docs < 1 || cfg.Pages < 1 || cfg.Kills < 0 || cfg.PoisonEvery < 0:
		return Result{}, fmt.Errorf("chaos: docs %d and pages %d must be at least 1, kills %d and poison-every %d not negative",
			cfg.Docs, cfg.Pages, cfg.Kills, cfg.PoisonEvery)
	}
	if cfg.Finish == 0 {
		cfg.Finish = 2 * time.Minute
	}
	fmt.Fprintf(cfg.Out, "seed %d: %d documents (%d pages each, every %d poison), %d kills, in %s\n",
		cfg.Seed, cfg.Docs, cfg.Pages, cfg.PoisonEvery, cfg.Kills, cfg.Dir)
	if err := prepare(ctx, cfg.Dir); err != nil {
		return Result{}, err
	}
	// The documents arrive in waves, one before each killed run, so that
	// every kill finds work in flight; the last run only finishes.
	wave := cfg.Docs
	if cfg.Kills > 0 {
		wave = max(1, (cfg.Docs+cfg.Kills-1)/cfg.Kills)
	}
	seeded := 0
	addWave := func() error {
		n := min(wave, cfg.Docs-seeded)
		if n == 0 {
			return nil
		}
		err := seed(ctx, cfg, seeded, seeded+n)
		seeded += n
		return err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636861))
	res := Result{}
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
		if err := seed(ctx, cfg, seeded, cfg.Docs); err != nil {
			return res, err
		}
	}
	if err := finish(ctx, cfg); err != nil {
		return res, err
	}
	return check(ctx, cfg, res)
}

// runOnce starts the worker and kills it: at a named crash point with a
// random count (half the time), or after a random time. It reports
// whether the worker was killed (a crash point the worker never reached
// lets it run until the time limit, then it is killed anyway) and how.
func runOnce(ctx context.Context, cfg Config, rng *rand.Rand) (bool, string, error) {
	cmd := cfg.Worker(cfg.Dir)
	how := ""
	wait := time.Duration(50+rng.IntN(1500)) * time.Millisecond
	if rng.IntN(2) == 0 {
		p := points[rng.IntN(len(points))]
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
		if killedBy(err) {
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

// killedBy reports whether err is the exit of a process killed by SIGKILL.
func killedBy(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// finish runs the worker without kills until every document's workflow
// has ended and its end is notified, then stops it with SIGTERM.
func finish(ctx context.Context, cfg Config) error {
	cmd := cfg.Worker(cfg.Dir)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start the last worker: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
					return nil // stopped before it could catch the signal
				}
			}
			return err
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			return errors.New("chaos: the last worker did not stop within 30 s of SIGTERM")
		}
	}
	deadline := time.Now().Add(cfg.Finish)
	for {
		left, err := unfinished(ctx, cfg.Dir)
		if err != nil {
			_ = stop()
			return err
		}
		if left == 0 {
			return stop()
		}
		if time.Now().After(deadline) {
			_ = stop()
			fmt.Fprintf(cfg.Out, "the last run did not finish within %v: %d documents left\n", cfg.Finish, left)
			return nil // the check reports them lost
		}
		select {
		case err := <-done:
			return fmt.Errorf("chaos: the last worker ended by itself: %v", err)
		case <-ctx.Done():
			_ = stop()
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// prepare makes the run's directory, which must be empty or missing.
func prepare(ctx context.Context, dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("chaos: %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	st, err := openStore(ctx, dir)
	if err != nil {
		return err
	}
	return st.Close()
}

// seed adds the documents from (0-based) to to, each with the message
// that announces it in the outbox, in the same transaction.
func seed(ctx context.Context, cfg Config, from, to int) error {
	st, err := openStore(ctx, cfg.Dir)
	if err != nil {
		return err
	}
	defer st.Close()
	for i := from; i < to; i += 100 {
		err := st.RunTx(ctx, func(tx *sql.Tx, ex store.Executor) error {
			for j := i; j < min(i+100, to); j++ {
				id := fmt.Sprintf("doc-%d", j+1)
				poison := cfg.PoisonEvery > 0 && (j+1)%cfg.PoisonEvery == 0
				if _, err := tx.ExecContext(ctx, `INSERT INTO chaos_docs (id, poison, pages) VALUES (?, ?, ?)`, id, poison, cfg.Pages); err != nil {
					return err
				}
				if _, err := outbox.Add(ctx, ex, time.Now(), store.OutboxMessage{Topic: docsTopic, Key: id, Payload: []byte(id)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("chaos: seed: %w", err)
		}
	}
	return nil
}
