package loadbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// faultEnv is what a fault acts on.
type faultEnv struct {
	cfg    Config
	admin  *pgxpool.Pool
	t      *target
	worker *workerProc
	// restart runs the worker process again after a kill.
	restart func() error
}

// fault is a running fault; stop ends it and says what it did.
type fault interface {
	stop() (string, error)
}

// startFault starts the fault of phase kind k, or returns nil for a phase
// without one (clean, high-load: the producer's factor does those).
func startFault(ctx context.Context, k PhaseKind, env faultEnv) (fault, error) {
	faultURL := withAppName(env.cfg.URL, "loadbench-fault")
	switch k {
	case IdleInTx:
		return startIdleInTx(ctx, faultURL)
	case ActiveReaders:
		return startReaders(ctx, faultURL, env)
	case BackendKill:
		return startLoop(ctx, time.Duration(float64(time.Second)/env.cfg.KillRate), "backends terminated", func(ctx context.Context) (bool, error) {
			return terminateOne(ctx, env.admin, env.t.system)
		}), nil
	case PoolExhaustion:
		return startIdleConns(ctx, faultURL, env)
	case RepeatedKill:
		return startLoop(ctx, env.cfg.KillEvery, "worker process kills", func(context.Context) (bool, error) {
			env.worker.kill()
			return true, env.restart()
		}), nil
	case NoisyNeighbour:
		return startBurner(env.cfg.NoisyCPUs)
	}
	return nil, nil
}

// idleInTx holds a transaction that has an xid open: the cluster's xmin
// horizon stays at it, so that no dead tuple made after it can be removed.
type idleInTx struct {
	conn *pgx.Conn
	tx   pgx.Tx
	xid  int64
}

func startIdleInTx(ctx context.Context, url string) (fault, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("idle-in-tx: connect: %w", err)
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		var f idleInTx
		err = tx.QueryRow(ctx, "SELECT txid_current()").Scan(&f.xid)
		if err == nil {
			f.conn, f.tx = conn, tx
			return &f, nil
		}
	}
	conn.Close(ctx)
	return nil, fmt.Errorf("idle-in-tx: %w", err)
}

func (f *idleInTx) stop() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := f.tx.Rollback(ctx)
	return fmt.Sprintf("transaction %d held open", f.xid), errors.Join(err, f.conn.Close(ctx))
}

// readers are REPEATABLE READ transactions scanning the job table, each
// held for ReaderTx and begun again, staggered so that one is always
// open.
type readers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	scans  atomic.Int64
	errs   atomic.Int64
}

func startReaders(ctx context.Context, url string, env faultEnv) (fault, error) {
	rctx, cancel := context.WithCancel(ctx)
	r := &readers{cancel: cancel}
	n := env.cfg.Readers
	for i := range n {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			cancel()
			r.wg.Wait()
			return nil, fmt.Errorf("active-readers: connect: %w", err)
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer conn.Close(context.Background())
			sleepCtx(rctx, env.cfg.ReaderTx*time.Duration(i)/time.Duration(n))
			q := "SELECT count(*), max(id) FROM " + env.t.qualified
			for rctx.Err() == nil {
				tx, err := conn.BeginTx(rctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
				if err != nil {
					r.errs.Add(1)
					sleepCtx(rctx, time.Second)
					continue
				}
				end := time.Now().Add(env.cfg.ReaderTx)
				for rctx.Err() == nil && time.Now().Before(end) {
					var c, m *int64
					if err := tx.QueryRow(rctx, q).Scan(&c, &m); err != nil {
						if rctx.Err() == nil {
							r.errs.Add(1)
						}
						break
					}
					r.scans.Add(1)
					sleepCtx(rctx, env.cfg.ReaderPause)
				}
				_ = tx.Rollback(context.Background())
			}
		}()
	}
	return r, nil
}

func (r *readers) stop() (string, error) {
	r.cancel()
	r.wg.Wait()
	return fmt.Sprintf("%d scans, %d errors", r.scans.Load(), r.errs.Load()), nil
}

// loop runs an action every period until stopped, counting its successes.
type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
	what   string
	n      int
	err    error
}

func startLoop(ctx context.Context, period time.Duration, what string, act func(context.Context) (bool, error)) fault {
	lctx, cancel := context.WithCancel(ctx)
	l := &loop{cancel: cancel, done: make(chan struct{}), what: what}
	go func() {
		defer close(l.done)
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-tk.C:
			}
			ok, err := act(lctx)
			if ok {
				l.n++
			}
			if err != nil && lctx.Err() == nil {
				l.err = err
				return
			}
		}
	}()
	return l
}

func (l *loop) stop() (string, error) {
	l.cancel()
	<-l.done
	return fmt.Sprintf("%d %s", l.n, l.what), l.err
}

// terminateOne terminates one backend, chosen at random, of the system's
// connections (producer's and workers').
func terminateOne(ctx context.Context, admin *pgxpool.Pool, system System) (bool, error) {
	var ok bool
	err := admin.QueryRow(ctx, `SELECT coalesce(pg_terminate_backend(pid), false) FROM pg_stat_activity
WHERE application_name = ANY($1) AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1`,
		[]string{appName(system, "producer"), appName(system, "worker")}).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ok, err
}

// idleConns holds idle connections to the server.
type idleConns struct {
	conns []*pgx.Conn
	want  int
}

// startIdleConns opens IdleConns connections, or as many as the server has
// free slots for less ReserveConns (left to the systems, the benchmark and
// everyone else who shares the server).
func startIdleConns(ctx context.Context, url string, env faultEnv) (fault, error) {
	var free int
	err := env.admin.QueryRow(ctx, `SELECT current_setting('max_connections')::int
	- current_setting('superuser_reserved_connections')::int
	- (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')`).Scan(&free)
	if err != nil {
		return nil, fmt.Errorf("pool-exhaustion: free slots: %w", err)
	}
	f := &idleConns{want: env.cfg.IdleConns}
	n := min(env.cfg.IdleConns, free-env.cfg.ReserveConns)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for range max(n, 0) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				return
			}
			mu.Lock()
			f.conns = append(f.conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return f, nil
}

func (f *idleConns) stop() (string, error) {
	for _, c := range f.conns {
		c.Close(context.Background())
	}
	return fmt.Sprintf("%d idle connections held (asked %d)", len(f.conns), f.want), nil
}

// burner is a CPU-bound process: the benchmark re-executed with RoleBurn.
type burner struct{ cmd *exec.Cmd }

func startBurner(cpus int) (fault, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), RoleEnv+"="+RoleBurn, fmt.Sprintf("GOMAXPROCS=%d", cpus))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("noisy-neighbour: %w", err)
	}
	return &burner{cmd: cmd}, nil
}

func (b *burner) stop() (string, error) {
	_ = b.cmd.Process.Kill()
	_ = b.cmd.Wait()
	var cpu time.Duration
	if ru, ok := b.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return fmt.Sprintf("burner used %.1f CPU s", cpu.Seconds()), nil
}
