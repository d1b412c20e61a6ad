// Package reconcile compares a source of truth with an index derived from
// it and repairs the drift: entries missing from the index, entries older
// there than in the source (stale), and entries the source no longer has
// (extra). Both sides list their entries in id order, a page at a time, so
// a run walks both in step, in bounded memory, and repairs in batches.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Entry is an entry of either side: its id, and when its content last
// changed.
type Entry struct {
	ID        string
	UpdatedAt time.Time
}

// Lister lists a side's entries with ids greater than after, in id order
// (byte order of the ids), at most limit.
type Lister interface {
	Entries(ctx context.Context, after string, limit int) ([]Entry, error)
}

// ListFunc makes a Lister of a function.
type ListFunc func(ctx context.Context, after string, limit int) ([]Entry, error)

// Entries calls f.
func (f ListFunc) Entries(ctx context.Context, after string, limit int) ([]Entry, error) {
	return f(ctx, after, limit)
}

// Config is a reconciliation run.
type Config struct {
	// Source is the source of truth; Index the derived side. Required.
	Source, Index Lister
	// Repair writes the source's current version of ids into the index
	// (those missing or stale). Required.
	Repair func(ctx context.Context, ids []string) error
	// Remove deletes ids from the index (entries the source lacks). Nil:
	// extra entries are counted, not removed.
	Remove func(ctx context.Context, ids []string) error
	// Batch is the page size of the listings and of the repairs. Default
	// 100.
	Batch int
	// After resumes an earlier run: ids up to and including it are taken
	// as reconciled. Default "" (from the start).
	After string
	// Progress, if set, is called after each batch with the counts so far.
	// Its error stops the run (a run cancelled by its operator, say).
	Progress func(Progress) error
}

// Progress is what a run has done so far.
type Progress struct {
	// Checked is how many source entries were compared.
	Checked int
	// Missing, Stale and Extra are the drift found; Repaired and Removed
	// what was fixed.
	Missing, Stale, Extra, Repaired, Removed int
	// LastID is the highest source id reconciled: a run resumed with
	// After = LastID goes on from there.
	LastID string
}

// DefaultBatch is the default batch size.
const DefaultBatch = 100

// Run reconciles cfg.Index with cfg.Source, repairing in batches, and
// returns what it did.
func Run(ctx context.Context, cfg Config) (Progress, error) {
	switch {
	case cfg.Source == nil || cfg.Index == nil || cfg.Repair == nil:
		return Progress{}, errors.New("reconcile: Config.Source, Index and Repair are required")
	case cfg.Batch < 0:
		return Progress{}, fmt.Errorf("reconcile: batch %d is negative", cfg.Batch)
	case cfg.Batch == 0:
		cfg.Batch = DefaultBatch
	}
	r := &run{cfg: cfg, p: Progress{LastID: cfg.After}}
	src := &cursor{l: cfg.Source, after: cfg.After, batch: cfg.Batch}
	idx := &cursor{l: cfg.Index, after: cfg.After, batch: cfg.Batch}
	for {
		s, sok, err := src.peek(ctx)
		if err != nil {
			return r.p, fmt.Errorf("reconcile: list the source: %w", err)
		}
		i, iok, err := idx.peek(ctx)
		if err != nil {
			return r.p, fmt.Errorf("reconcile: list the index: %w", err)
		}
		switch {
		case !sok && !iok:
			return r.p, r.flush(ctx, true)
		case sok && (!iok || s.ID < i.ID): // in the source only
			src.next()
			r.p.Missing++
			r.repair = append(r.repair, s.ID)
			r.checked(s.ID)
		case !sok || i.ID < s.ID: // in the index only
			idx.next()
			r.p.Extra++
			if cfg.Remove != nil {
				r.remove = append(r.remove, i.ID)
			}
		default: // in both
			src.next()
			idx.next()
			if i.UpdatedAt.Before(s.UpdatedAt) {
				r.p.Stale++
				r.repair = append(r.repair, s.ID)
			}
			r.checked(s.ID)
		}
		if err := r.flush(ctx, false); err != nil {
			return r.p, err
		}
	}
}

// run is the state of a Run.
type run struct {
	cfg            Config
	p              Progress
	repair, remove []string
	sinceReport    int
	pendingLast    string // the last id checked, reported once its batch is repaired
}

func (r *run) checked(id string) {
	r.p.Checked++
	r.sinceReport++
	r.pendingLast = id
}

// flush repairs and removes a full batch (or, at the end, whatever is
// left) and reports progress after each batch of checks.
func (r *run) flush(ctx context.Context, final bool) error {
	// A batch of checks ends a batch of repairs, however few: so that
	// progress, and the point a resumed run starts from, move every batch.
	due := final || r.sinceReport >= r.cfg.Batch
	if len(r.repair) >= r.cfg.Batch || (due && len(r.repair) > 0) {
		if err := r.cfg.Repair(ctx, r.repair); err != nil {
			return fmt.Errorf("reconcile: repair %d entries: %w", len(r.repair), err)
		}
		r.p.Repaired += len(r.repair)
		r.repair = r.repair[:0]
	}
	if len(r.remove) >= r.cfg.Batch || (due && len(r.remove) > 0) {
		if err := r.cfg.Remove(ctx, r.remove); err != nil {
			return fmt.Errorf("reconcile: remove %d entries: %w", len(r.remove), err)
		}
		r.p.Removed += len(r.remove)
		r.remove = r.remove[:0]
	}
	if len(r.repair) == 0 && (r.sinceReport >= r.cfg.Batch || final) {
		// Everything checked so far is repaired: a resumed run may start
		// after it.
		if r.pendingLast != "" {
			r.p.LastID = r.pendingLast
		}
		r.sinceReport = 0
		if r.cfg.Progress != nil {
			if err := r.cfg.Progress(r.p); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// cursor pages through a Lister.
type cursor struct {
	l     Lister
	after string
	batch int
	page  []Entry
	done  bool
}

// peek returns the next entry without taking it, and false at the end.
func (c *cursor) peek(ctx context.Context) (Entry, bool, error) {
	if len(c.page) == 0 && !c.done {
		page, err := c.l.Entries(ctx, c.after, c.batch)
		if err != nil {
			return Entry{}, false, err
		}
		for i := 1; i < len(page); i++ {
			if page[i].ID <= page[i-1].ID {
				return Entry{}, false, fmt.Errorf("entries out of order: %q after %q", page[i].ID, page[i-1].ID)
			}
		}
		if len(page) > 0 && page[0].ID <= c.after {
			return Entry{}, false, fmt.Errorf("entry %q not after %q", page[0].ID, c.after)
		}
		c.page, c.done = page, len(page) < c.batch
		if len(page) > 0 {
			c.after = page[len(page)-1].ID
		}
	}
	if len(c.page) == 0 {
		return Entry{}, false, nil
	}
	return c.page[0], true, nil
}

func (c *cursor) next() { c.page = c.page[1:] }
