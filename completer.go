package weir

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/weirhq/weir/store"
)

// completeBatch is the most completions one CompleteMany writes.
const completeBatch = 100

// completion is a job whose worker succeeded, waiting for its completion
// to be written.
type completion struct {
	lease store.Lease
	log   *slog.Logger
}

// completer writes the completions of successful jobs in batches: it
// takes every completion queued when it wakes, and writes them with one
// CompleteMany per completeBatch. Under load completions queue while a
// write is in flight, so batches grow with the load; an idle client
// writes each completion at once. A job waiting for its completion stays
// among the client's running jobs, so heartbeats keep its lease, but its
// worker slot is free. Writes are bounded: at most cap(slots) completions
// wait at once, and a worker whose success finds none free waits for one.
type completer struct {
	slots chan struct{} // one per completion queued or being written
	wake  chan struct{} // a completion was queued
	done  chan struct{} // closed when the completer has exited

	mu      sync.Mutex
	queue   []completion
	stopped bool // no more batches: add writes the completion itself
}

func newCompleter(workers int) *completer {
	return &completer{
		slots: make(chan struct{}, max(workers, completeBatch)),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
}

// add queues the completion of a job, or, once the completer has
// stopped, writes it at once.
func (cp *completer) add(c *Client, x completion) {
	cp.slots <- struct{}{}
	cp.mu.Lock()
	if cp.stopped {
		cp.mu.Unlock()
		c.writeCompletions([]completion{x})
		<-cp.slots
		return
	}
	cp.queue = append(cp.queue, x)
	cp.mu.Unlock()
	select {
	case cp.wake <- struct{}{}:
	default:
	}
}

// run writes the queued completions whenever one is queued, until stop
// closes; then it writes those still queued and exits.
func (cp *completer) run(c *Client, stop <-chan struct{}) {
	defer close(cp.done)
	for {
		select {
		case <-cp.wake:
			cp.flush(c, false)
		case <-stop:
			cp.flush(c, true)
			return
		}
	}
}

// flush writes every completion queued; with last, it marks the completer
// stopped first, so that nothing is queued after it.
func (cp *completer) flush(c *Client, last bool) {
	cp.mu.Lock()
	batch := cp.queue
	cp.queue = nil
	cp.stopped = cp.stopped || last
	cp.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), completeBatch)
		c.writeCompletions(batch[:n])
		for range n {
			<-cp.slots
		}
		batch = batch[n:]
	}
}

// writeCompletions completes the jobs of xs in one CompleteMany, logs the
// outcome of each, and forgets them.
func (c *Client) writeCompletions(xs []completion) {
	leases := make([]store.Lease, len(xs))
	for i, x := range xs {
		leases[i] = x.lease
	}
	lost, err := c.ex.CompleteMany(context.Background(), c.clock.Now(), leases)
	if err != nil {
		for _, x := range xs {
			c.logWriteErr(x.log, "complete", err)
		}
	}
	isLost := make(map[int64]bool, len(lost))
	for _, id := range lost {
		isLost[id] = true
	}
	for _, x := range xs {
		switch {
		case err != nil:
		case isLost[x.lease.ID]:
			c.logWriteErr(x.log, "complete", fmt.Errorf("weir: job %d at attempt %d: %w", x.lease.ID, x.lease.Attempt, store.ErrLeaseLost))
		default:
			x.log.Debug("job completed")
		}
		c.forget(x.lease.ID, x.lease)
	}
}
