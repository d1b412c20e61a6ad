package ingest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/store/appdb"
)

// Timing of the write probe of /readyz.
const (
	probeEvery   = 5 * time.Second // an answer is kept this long
	probeTimeout = 2 * time.Second // a probe that takes longer fails
	probeSize    = 4096            // bytes written: one block
)

// writeProbe tells whether the service can write: a database and an index
// that answer can still refuse every write (a full disk). It writes a
// block to a file in the data directory, syncs it and removes it, and on
// PostgreSQL commits a transaction that takes a transaction id (a write
// to the server's log); at most once every probeEvery, keeping the answer
// in between, so that a probe polled every second costs one write every
// five.
type writeProbe struct {
	clock clock.Clock
	probe func(ctx context.Context) error

	mu  sync.Mutex
	at  time.Time // of the last probe; zero before the first
	err error     // its answer
}

// newWriteProbe probes dir and db on clk (default the real clock).
func newWriteProbe(dir string, db *appdb.DB, clk clock.Clock) *writeProbe {
	return &writeProbe{clock: clock.Or(clk), probe: func(ctx context.Context) error {
		if err := probeDir(ctx, dir); err != nil {
			return err
		}
		if db != nil && db.Driver == appdb.Postgres {
			if _, err := db.SQL.ExecContext(ctx, `SELECT txid_current()`); err != nil {
				return fmt.Errorf("the database does not accept writes: %w", err)
			}
		}
		return nil
	}}
}

// check returns the answer of the last probe if it is recent, or probes.
// Probes do not overlap: a caller waits for the one under way.
func (p *writeProbe) check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if !p.at.IsZero() && now.Sub(p.at) < probeEvery && now.Sub(p.at) >= 0 {
		return p.err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	p.err, p.at = p.probe(ctx), now
	return p.err
}

// probeDir writes probeSize bytes to a new file in dir, syncs and removes
// it. Its error names the cause (no space left on device, a read-only file
// system), not the path, since /readyz answers any Host.
func probeDir(ctx context.Context, dir string) error {
	done := make(chan error, 1)
	go func() {
		f, err := os.CreateTemp(dir, ".weir-ready-*")
		if err != nil {
			done <- err
			return
		}
		block := make([]byte, probeSize)
		_, _ = rand.Read(block) // not zeros, which a file system may not store
		_, err = f.Write(block)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		// Removed before the answer, so that a probe that returned has
		// left nothing behind.
		_ = os.Remove(f.Name())
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = fmt.Errorf("no answer in %v", probeTimeout)
	}
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("the data directory does not accept writes: %w", err)
}
