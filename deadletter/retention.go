package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/defaults"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// The retention defaults, from the DLQ retention policy in weir's spec.
const (
	DefaultMaxAge   = 7 * 24 * time.Hour
	DefaultMaxCount = 10_000
)

// ErrConfig is wrapped by the error Enforce returns for a bad Retention
// field; the error names the field.
var ErrConfig = errors.New("deadletter: invalid retention config")

// Retention is the dead-letter store's retention policy: dead letters older
// than MaxAge, and beyond that the oldest past MaxCount, are archived to a
// JSON Lines file in ArchiveDir and then purged. The zero value of every
// field but ArchiveDir works.
type Retention struct {
	// MaxAge is how long a dead letter is kept. A letter is due when its
	// age, the clock's now minus its FailedAt, is more than MaxAge: one
	// exactly MaxAge old is kept. Default 7 days (DefaultMaxAge); must
	// not be negative.
	MaxAge time.Duration
	// MaxCount is how many dead letters are kept once those past MaxAge
	// are gone: the newest MaxCount by id, the order in which the store
	// recorded them. Default 10,000 (DefaultMaxCount); must not be
	// negative.
	MaxCount int
	// ArchiveDir is the directory the archive files go to. Required; it
	// must exist and be writable. Each run that archives anything writes
	// a new file, dead-letters-<UTC time>.jsonl (with -1, -2, ... before
	// .jsonl should the name be taken), mode 0600, one Record a line. A
	// file named .dead-letters-*.tmp there is a run's unfinished archive,
	// left by a crash: it is not an archive, and may be deleted.
	ArchiveDir string
	// Clock gives the time that ages are measured from. Default
	// clock.Real.
	Clock clock.Clock
	// Logger receives a line when an archive is written and when a run
	// ends. Default: none.
	Logger *slog.Logger
	// BatchSize is how many dead letters are read from the store at a
	// time, and how many are purged in one transaction. Default 500
	// (DefaultBatchSize); must not be negative.
	BatchSize int
}

// Result is what one Enforce did.
type Result struct {
	// Archived is how many dead letters were written to File.
	Archived int
	// Purged is how many of them were then deleted from the store. It is
	// less than Archived when the purge failed part way (Enforce then
	// returns the error too), or when some of the letters were requeued
	// or purged by someone else between the archive and the purge.
	Purged int
	// File is the archive's path; empty when nothing was due.
	File string
}

// withDefaults returns r with its defaults filled in, or an error wrapping
// ErrConfig that names the bad field.
func (r Retention) withDefaults() (Retention, error) {
	if r.ArchiveDir == "" {
		return r, fmt.Errorf("%w: ArchiveDir is empty: name the directory that archives of purged dead letters go to", ErrConfig)
	}
	if err := cmp.Or(
		defaults.Set("MaxAge", &r.MaxAge, DefaultMaxAge),
		defaults.Set("MaxCount", &r.MaxCount, DefaultMaxCount),
		defaults.Set("BatchSize", &r.BatchSize, DefaultBatchSize),
	); err != nil {
		return r, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	r.Clock = clock.Or(r.Clock)
	r.Logger = cmp.Or(r.Logger, slog.New(slog.DiscardHandler))
	return r, nil
}

// Enforce applies the policy once. It selects the dead letters due: those
// older than MaxAge (FailedAt strictly before now-MaxAge), then, of the
// rest, the oldest by id beyond the newest MaxCount. It writes them to a
// new archive file in ArchiveDir, durably (a temporary file there, fsynced,
// given its final name without replacing any file, and the directory
// fsynced), and only then purges exactly those ids, BatchSize at a time,
// with their dead jobs. When nothing is due it writes no file.
//
// Nothing is lost, whatever fails or wherever the process stops: until the
// archive is durable nothing is purged, so on an error before that (a
// missing or unwritable ArchiveDir, a full disk, a store read failing; the
// error then wraps ErrArchive or the store's error) the store is as it
// was; once it is durable every letter purged is in it. A stop between the
// two leaves letters in both the archive and the store, and the next run
// archives them again: duplicates across archive files, with the same id,
// and never a loss.
//
// Enforce holds the ids it archives in memory until it has purged them (8
// bytes each), and no more than BatchSize letters at a time. Runs must not
// overlap: two at once would archive the same letters twice (and lose
// nothing).
func (r Retention) Enforce(ctx context.Context, ex store.DeadLetters) (Result, error) {
	r, err := r.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if err := checkDir(r.ArchiveDir); err != nil {
		return Result{}, fmt.Errorf("enforce dead-letter retention: %w", err)
	}
	now := r.Clock.Now()
	cutoff := ceilMicro(now.Add(-r.MaxAge))
	// FailedBefore (strictly earlier) selects the letters older than
	// MaxAge; FailedAfter (at or later), its complement, those it keeps.
	old := store.DeadLetterFilter{FailedBefore: cutoff}
	young := store.DeadLetterFilter{FailedAfter: cutoff}

	kept := 0
	err = eachPage(ctx, ex, young, 0, r.BatchSize, func(page []*weirtype.DeadLetter) error {
		kept += len(page)
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("enforce dead-letter retention: count: %w", err)
	}
	excess := max(0, kept-r.MaxCount)

	a := &archive{dir: r.ArchiveDir, now: now, logger: r.Logger}
	var ids []int64
	add := func(page []*weirtype.DeadLetter) error {
		for _, dl := range page {
			if err := a.add(RecordOf(dl)); err != nil {
				return err
			}
			ids = append(ids, dl.ID)
		}
		return nil
	}
	err = eachPage(ctx, ex, old, 0, r.BatchSize, add)
	if err == nil && excess > 0 {
		err = eachPage(ctx, ex, young, excess, r.BatchSize, add)
	}
	if err != nil {
		a.abort()
		return Result{}, fmt.Errorf("enforce dead-letter retention: %w", err)
	}
	if len(ids) == 0 {
		r.Logger.DebugContext(ctx, "dead-letter retention: nothing due", "max_age", r.MaxAge, "max_count", r.MaxCount)
		return Result{}, nil
	}
	file, err := a.commit()
	if err != nil {
		return Result{}, fmt.Errorf("enforce dead-letter retention: %w", err)
	}
	res := Result{Archived: len(ids), File: file}
	r.Logger.InfoContext(ctx, "dead letters archived", "file", file, "archived", len(ids))

	// Only now may the store forget them. Each batch is one transaction:
	// a failure leaves the rest in the store, and in the archive.
	for batch := range slices.Chunk(ids, r.BatchSize) {
		n, err := ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{IDs: batch})
		res.Purged += n
		if err != nil {
			return res, fmt.Errorf("enforce dead-letter retention: purge after archiving %d to %s (the unpurged stay in the store and will be archived again): %w",
				len(ids), file, err)
		}
	}
	r.Logger.InfoContext(ctx, "dead-letter retention enforced", "file", file, "archived", res.Archived, "purged", res.Purged)
	return res, nil
}

// ceilMicro is t rounded up to a whole microsecond, the stores' resolution:
// for a stored FailedAt, FailedAt < ceilMicro(t) exactly when FailedAt < t,
// whichever way the driver would round t itself.
func ceilMicro(t time.Time) time.Time {
	c := t.Truncate(time.Microsecond)
	if c.Before(t) {
		c = c.Add(time.Microsecond)
	}
	return c
}
