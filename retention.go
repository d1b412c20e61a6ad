package weir

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/store"
)

// Defaults of the retention of completed and cancelled jobs.
const (
	// DefaultJobRetention is Config.JobRetention's default.
	DefaultJobRetention = 24 * time.Hour
	// DefaultRetentionEvery is Config.RetentionEvery's default.
	DefaultRetentionEvery = time.Minute
	// KeepJobs, as Config.JobRetention or KindConfig.Retention, keeps
	// completed and cancelled jobs for good.
	KeepJobs time.Duration = math.MaxInt64
	// retentionBatch is how many jobs one delete statement deletes: each
	// is a short transaction of its own.
	retentionBatch = 1000
	// retentionLease names the store's lease of the retention sweep.
	retentionLease = "retention"
)

// RetentionMetrics is implemented by a Config.Metrics that counts the jobs
// the retention sweep deletes (package metrics' *Metrics does).
type RetentionMetrics interface {
	// JobsDeleted records n completed or cancelled jobs of kind deleted
	// past their retention.
	JobsDeleted(kind string, n int)
}

// RetentionResult is what one retention sweep did.
type RetentionResult struct {
	// Skipped is set when another process holds the retention lease: this
	// one deleted nothing.
	Skipped bool
	// Deleted are the jobs deleted, by kind.
	Deleted map[string]int
	// Vacuum is what the sweep found and did about the job table's dead
	// rows, with a store that needs a vacuum (store.Vacuumer); see
	// SweepRetention.
	Vacuum store.VacuumResult
}

// retention is how long the completed and cancelled jobs of kind are
// kept: its KindConfig.Retention when this client registers it with one,
// otherwise Config.JobRetention.
func (c *Client) retention(kind string) time.Duration {
	if r := c.kinds[kind]; r != nil && r.cfg.Retention > 0 {
		return r.cfg.Retention
	}
	return c.cfg.JobRetention
}

// SweepRetention runs the retention sweep once (a started client with
// workers runs it every Config.RetentionEvery). It deletes the completed
// and cancelled jobs finished longer ago than their kind's retention
// (KindConfig.Retention for the kinds this client registers,
// Config.JobRetention for the others; KeepJobs keeps them), oldest first,
// at most 1,000 in each statement, each a short transaction of its own,
// so that it never holds locks for long nor slows the claims beside it.
// Dead jobs are left to the dead-letter retention, which deletes them
// with their dead letters; waiting and running jobs are never deleted.
//
// One process at a time sweeps: the sweep takes the store's retention
// lease first (renewed before each statement, held 3 × RetentionEvery)
// and returns Skipped, deleting nothing, while another process holds it.
// Every process should therefore agree on the retentions: give a kind the
// same KindConfig.Retention wherever it is registered, and the same
// Config.JobRetention everywhere.
//
// With a store whose job table keeps dead rows until it is vacuumed
// (PostgreSQL, store.Vacuumer), a sweep whose deletes all succeeded then
// vacuums the table where the server's autovacuum does not run, once its
// dead rows pass the threshold autovacuum would apply: the rows the sweep
// deleted, and the old versions every claim and completion leaves.
func (c *Client) SweepRetention(ctx context.Context) (RetentionResult, error) {
	res := RetentionResult{Deleted: map[string]int{}}
	leaseFor := 3 * c.cfg.RetentionEvery
	held := func() (bool, error) {
		sctx, cancel := context.WithTimeout(ctx, c.storeTimeout())
		defer cancel()
		return c.ex.TakeSweepLease(sctx, c.clock.Now(), retentionLease, c.cfg.ID, leaseFor)
	}
	ok, err := held()
	if err != nil {
		return res, fmt.Errorf("weir: retention sweep: take the lease: %w", err)
	}
	if !ok {
		res.Skipped = true
		return res, nil
	}
	lost, err := c.purgeJobs(ctx, &res, held)
	if v, ok := c.cfg.Store.(store.Vacuumer); ok && !lost && err == nil && ctx.Err() == nil {
		err = c.vacuumJobs(ctx, v, &res, held)
	}
	if err != nil {
		return res, fmt.Errorf("weir: retention sweep: %w", err)
	}
	return res, nil
}

// vacuumJobs asks v to vacuum the job table, into res, once the lease
// (held) is renewed. The vacuum is not bounded by the store timeout (it
// takes minutes on a large table) and ends with ctx; the lease may lapse
// meanwhile, and another process's sweep then finds the table held and
// leaves it (see store.Vacuumer).
func (c *Client) vacuumJobs(ctx context.Context, v store.Vacuumer, res *RetentionResult, held func() (bool, error)) error {
	ok, err := held()
	if err != nil || !ok {
		return err
	}
	res.Vacuum, err = v.VacuumJobs(ctx)
	return err
}

// purgeJobs deletes the final jobs past their retention, kind by kind,
// counting them in res; lost reports that another process took the lease
// meanwhile, and the sweep stopped there.
func (c *Client) purgeJobs(ctx context.Context, res *RetentionResult, held func() (bool, error)) (lost bool, _ error) {
	sctx, cancel := context.WithTimeout(ctx, c.storeTimeout())
	kinds, err := c.ex.FinalJobKinds(sctx)
	cancel()
	if err != nil {
		return false, fmt.Errorf("list kinds: %w", err)
	}
	m, _ := c.cfg.Metrics.(RetentionMetrics)
	var errs []error
	for _, kind := range kinds {
		keep := c.retention(kind)
		if keep == KeepJobs {
			continue
		}
		n, err := c.purgeKind(ctx, kind, keep, held)
		if n > 0 {
			res.Deleted[kind] = n
			if m != nil {
				m.JobsDeleted(kind, n)
			}
		}
		if errors.Is(err, errLeaseTaken) {
			c.log.Warn("retention sweep: another process took the retention lease; stopping", "kind", kind)
			return true, errors.Join(errs...)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("kind %q: %w", kind, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	return false, errors.Join(errs...)
}

// errLeaseTaken: another process holds the retention lease now.
var errLeaseTaken = errors.New("the retention lease is held by another process")

// purgeKind deletes the completed and cancelled jobs of kind finished
// more than keep ago, a batch at a time, renewing the lease (held) before
// each batch, and returns how many it deleted.
func (c *Client) purgeKind(ctx context.Context, kind string, keep time.Duration, held func() (bool, error)) (int, error) {
	total := 0
	for first := true; ; first = false {
		if !first {
			ok, err := held()
			if err != nil {
				return total, err
			}
			if !ok {
				return total, errLeaseTaken
			}
		}
		sctx, cancel := context.WithTimeout(ctx, c.storeTimeout())
		n, err := c.ex.PurgeJobs(sctx, store.PurgeJobsParams{Kind: kind, Before: c.clock.Now().Add(-keep), Limit: retentionBatch})
		cancel()
		total += n
		if err != nil || n < retentionBatch {
			return total, err
		}
	}
}

// retentionLoop runs the retention sweep at Start and every
// RetentionEvery until Stop.
func (c *Client) retentionLoop() {
	defer c.loopsWG.Done()
	for {
		ctx, cancel := c.untilStop()
		res, err := c.SweepRetention(ctx)
		c.loopFailed(ctx, "retention sweep", err)
		cancel()
		if n := sum(res.Deleted); n > 0 {
			c.log.Info("retention sweep: deleted completed and cancelled jobs past their retention", "jobs", n)
		}
		if v := res.Vacuum; v.Vacuumed {
			c.log.Info("retention sweep: vacuumed the job table, where the server's autovacuum does not",
				"dead_rows", v.Dead, "threshold", v.Threshold, "took", v.Took.Round(time.Millisecond).String())
		}
		if !clock.Sleep(c.clock, c.cfg.RetentionEvery, c.loopsStop) {
			return
		}
	}
}
