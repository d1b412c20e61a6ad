package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weirhq/weir/store"
)

// The job counts read every job the store keeps, finished ones included:
// a scan that grows with the table (24 h of completed jobs by default) and
// that a scrape every few seconds would otherwise run back to back.
const (
	// A count that took at least countCached is not run again sooner
	// than countSpacing times its duration after it began: the scrapes
	// between serve its counts, and the database spends at most about a
	// twentieth of one connection's time counting. A faster count runs
	// at every scrape.
	countCached  = 100 * time.Millisecond
	countSpacing = 20
	// countLimit bounds a count that outlasts its scrape and goes on
	// for the scrapes after it, when the scrape timeout is shorter: a
	// query held open longer would hold back the vacuum of every table.
	countLimit = time.Minute
)

// jobCounter runs the store's job counts for the scrapes, at most one at
// a time, and keeps the last one's counts.
type jobCounter struct {
	read  func(context.Context) ([]store.JobCount, error)
	limit time.Duration // a count's bound: countLimit, or the scrape timeout when longer

	mu      sync.Mutex
	counts  []store.JobCount // the last count's, when ok
	ok      bool             // the last count succeeded
	err     error            // the last count's error, when not ok
	began   time.Time        // when the last count began
	took    time.Duration    // how long it ran
	running chan struct{}    // closed when the count in flight ends; nil when none
}

func newJobCounter(read func(context.Context) ([]store.JobCount, error), timeout time.Duration) *jobCounter {
	return &jobCounter{read: read, limit: max(countLimit, timeout)}
}

// get returns the job counts for a scrape that waits at most wait: the
// last count's when it is recent enough for its cost, else those of a
// count it starts (or the one in flight). When that count is still
// running after wait, get returns the last count's counts if it has any,
// and otherwise an error; the count goes on for the next scrape.
func (c *jobCounter) get(wait time.Duration) ([]store.JobCount, error) {
	c.mu.Lock()
	if c.running == nil {
		if c.ok && c.took >= countCached && time.Since(c.began) < countSpacing*c.took {
			counts := c.counts
			c.mu.Unlock()
			return counts, nil
		}
		c.start()
	}
	done := c.running
	c.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.running == done && c.ok:
		return c.counts, nil
	case c.running == done:
		return nil, fmt.Errorf("still counting after %v; the count goes on for the next scrape", wait)
	case !c.ok:
		return nil, c.err
	}
	return c.counts, nil
}

// start runs a count in the background; c.mu is held.
func (c *jobCounter) start() {
	done := make(chan struct{})
	c.running = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), c.limit)
		defer cancel()
		began := time.Now()
		counts, err := c.read(ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.running = nil
		c.began, c.took = began, time.Since(began)
		c.counts, c.err, c.ok = counts, err, err == nil
	}()
}
