package weir

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/weirtype"
)

// DeadLetterFilter selects dead letters for the client's dead-letter
// calls: the store's filter (by ids, job id, kind, queue, reason, failure
// time; zero fields match everything), and ages read on the client's
// clock, as the CLI's "weir dlq" and the admin API take them.
type DeadLetterFilter struct {
	weirtype.DeadLetterFilter
	// OlderThan, when positive, keeps the dead letters that failed more
	// than OlderThan before now on the client's clock (as
	// "weir dlq purge -before 72h"). With FailedBefore set too, the
	// earlier bound holds.
	OlderThan time.Duration
	// NewerThan, when positive, keeps those that failed at most NewerThan
	// before now on the client's clock. With FailedAfter set too, the
	// later bound holds.
	NewerThan time.Duration
}

// storeFilter returns f as the store's filter at now, or an error naming
// a bad field. With bulk (a requeue or a purge, which act on every dead
// letter that matches), the paging fields are refused rather than
// ignored: a purge "limited" to ten dead letters must not purge them all.
func (f DeadLetterFilter) storeFilter(now time.Time, bulk bool) (weirtype.DeadLetterFilter, error) {
	sf := f.DeadLetterFilter
	switch {
	case f.OlderThan < 0:
		return sf, fmt.Errorf("filter OlderThan %v is negative", f.OlderThan)
	case f.NewerThan < 0:
		return sf, fmt.Errorf("filter NewerThan %v is negative", f.NewerThan)
	case f.JobID < 0:
		return sf, fmt.Errorf("filter JobID %d is negative", f.JobID)
	case f.Reason != "" && !f.Reason.Valid():
		return sf, fmt.Errorf("filter reason %q is unknown (want one of %v)", f.Reason, weirtype.AbandonReasons())
	case bulk && (f.Limit != 0 || f.AfterID != 0):
		return sf, errors.New("filter Limit and AfterID page ListDeadLetters only: a requeue or a purge acts on every dead letter the filter matches")
	}
	if f.OlderThan > 0 {
		if b := now.Add(-f.OlderThan); sf.FailedBefore.IsZero() || b.Before(sf.FailedBefore) {
			sf.FailedBefore = b
		}
	}
	if f.NewerThan > 0 {
		if a := now.Add(-f.NewerThan); a.After(sf.FailedAfter) {
			sf.FailedAfter = a
		}
	}
	return sf, nil
}

// ListDeadLetters returns the dead letters that match f, lowest id first
// (f.Limit and f.AfterID page through them).
func (c *Client) ListDeadLetters(ctx context.Context, f DeadLetterFilter) ([]*weirtype.DeadLetter, error) {
	sf, err := f.storeFilter(c.clock.Now(), false)
	if err != nil {
		return nil, fmt.Errorf("weir: list dead letters: %w", err)
	}
	dls, err := c.ex.ListDeadLetters(ctx, sf)
	if err != nil {
		return nil, fmt.Errorf("weir: list dead letters: %w", err)
	}
	return dls, nil
}

// GetDeadLetter returns the dead letter with the id, or an error wrapping
// store.ErrNotFound.
func (c *Client) GetDeadLetter(ctx context.Context, id int64) (*weirtype.DeadLetter, error) {
	dl, err := c.ex.GetDeadLetter(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("weir: get dead letter %d: %w", id, err)
	}
	return dl, nil
}

// RequeueDeadLetters makes the jobs of the dead letters that match f run
// again at once (now on the client's clock), their attempts starting again
// from 1, their deadlines cleared and their TTLs starting anew, deletes
// those dead letters and returns the jobs' ids. It wakes this client's
// producers; other processes find the jobs at their next poll (on
// PostgreSQL, at once). A filter with no field set requeues every dead
// letter; one with Limit or AfterID is refused.
func (c *Client) RequeueDeadLetters(ctx context.Context, f DeadLetterFilter) ([]int64, error) {
	now := c.clock.Now()
	sf, err := f.storeFilter(now, true)
	if err != nil {
		return nil, fmt.Errorf("weir: requeue dead letters: %w", err)
	}
	ids, err := c.ex.RequeueDeadLetters(ctx, now, sf)
	if err != nil {
		return nil, fmt.Errorf("weir: requeue dead letters: %w", err)
	}
	if len(ids) > 0 {
		c.log.Info("requeued jobs from the dead-letter store", "jobs", len(ids))
		for q := range c.producers {
			c.wake(q)
		}
	}
	return ids, nil
}

// PurgeDeadLetters deletes for good the dead letters that match f and
// their jobs, and returns how many dead letters it deleted. A filter with
// no field set purges every dead letter; one with Limit or AfterID is
// refused.
func (c *Client) PurgeDeadLetters(ctx context.Context, f DeadLetterFilter) (int, error) {
	sf, err := f.storeFilter(c.clock.Now(), true)
	if err != nil {
		return 0, fmt.Errorf("weir: purge dead letters: %w", err)
	}
	n, err := c.ex.PurgeDeadLetters(ctx, sf)
	if err != nil {
		return 0, fmt.Errorf("weir: purge dead letters: %w", err)
	}
	if n > 0 {
		c.log.Info("purged dead letters and their jobs", "dead_letters", n)
	}
	return n, nil
}
