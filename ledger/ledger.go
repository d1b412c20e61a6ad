// Package ledger runs side effects outside the database (an upload, an
// index write, a notification) so that a retry or a restart does not
// repeat them. Do records the effect's start in the store before it runs
// and its result after; run again for the same key, it returns the
// recorded result instead of running the effect.
//
// A start with no result means a run was cut short between the effect and
// its record: the effect may or may not have happened. Do resolves it with
// the effect's Check ("does the blob exist?") when it has one, runs it
// again when it is Idempotent at its target (a PUT of the same bytes to
// the same path), and otherwise refuses with ErrUnresolved, for an
// operator to decide. An error from Run leaves the effect in that same
// state: a failed upload may still have landed.
//
// Keys follow the effect's place in the work: (transaction, series,
// ordinal), as a document's pages are (document, "page", n). Count tells
// how many effects of each series are done, for a step that waits for a
// series to complete.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/store"
)

// ErrUnresolved: the effect was begun and never finished, and it has
// neither a Check nor is it Idempotent, so there is no telling whether
// running it again would repeat it.
var ErrUnresolved = errors.New("ledger: effect begun and never finished, and nothing says whether it happened")

// Effect is a side effect and how to tell whether it happened.
type Effect struct {
	// Run performs the effect and returns its result (the blob's path,
	// the index entry's id), which the ledger keeps. Required.
	Run func(ctx context.Context) (result string, err error)
	// Check tells whether an effect begun and never finished happened,
	// and if so its result. Optional.
	Check func(ctx context.Context) (result string, happened bool, err error)
	// Idempotent declares that running the effect again has no further
	// effect at its target, so that an unfinished one is simply run
	// again when there is no Check.
	Idempotent bool
}

// Ledger runs effects through a store.
type Ledger struct {
	ex    store.Ledger
	clock clock.Clock
	log   *slog.Logger
}

// New returns a Ledger that keeps its records through ex, at the times
// clk gives (nil: the real clock), logging to logger (nil: slog.Default).
func New(ex store.Ledger, clk clock.Clock, logger *slog.Logger) *Ledger {
	if logger == nil {
		logger = slog.Default()
	}
	return &Ledger{ex: ex, clock: clock.Or(clk), log: logger}
}

// Do runs eff for the key k unless the ledger holds its result, and
// returns the result. See the package comment for an effect begun and
// never finished.
func (l *Ledger) Do(ctx context.Context, k store.EffectKey, eff Effect) (string, error) {
	if eff.Run == nil {
		return "", fmt.Errorf("ledger: effect %s has no Run", keyString(k))
	}
	rec, begun, err := l.ex.BeginEffect(ctx, l.clock.Now(), k)
	if err != nil {
		return "", fmt.Errorf("ledger: %w", err)
	}
	if rec.Finished() {
		return rec.Result, nil
	}
	if !begun {
		result, happened, err := l.resolve(ctx, k, rec.Attempts, eff)
		if err != nil {
			return "", err
		}
		if happened {
			return l.finish(ctx, k, result)
		}
	}
	result, err := eff.Run(ctx)
	if err != nil {
		return "", fmt.Errorf("ledger: effect %s: %w", keyString(k), err)
	}
	crashpoint.Hit(crashpoint.LedgerAfterEffect)
	return l.finish(ctx, k, result)
}

// resolve decides an effect begun and never finished: with Check, whether
// it happened and its result; otherwise not happened (run it again) when
// it is idempotent, or ErrUnresolved.
func (l *Ledger) resolve(ctx context.Context, k store.EffectKey, attempts int, eff Effect) (string, bool, error) {
	switch {
	case eff.Check != nil:
		result, happened, err := eff.Check(ctx)
		if err != nil {
			return "", false, fmt.Errorf("ledger: check effect %s: %w", keyString(k), err)
		}
		l.log.Info("effect begun and never finished; checked", "effect", keyString(k), "attempts", attempts, "happened", happened)
		return result, happened, nil
	case eff.Idempotent:
		l.log.Info("effect begun and never finished; running it again, as it is idempotent", "effect", keyString(k), "attempts", attempts)
		return "", false, nil
	default:
		return "", false, fmt.Errorf("%w: effect %s (begun %d times)", ErrUnresolved, keyString(k), attempts)
	}
}

// finish records result for k and returns the result the ledger keeps: the
// first recorded, should another run have finished it meanwhile.
func (l *Ledger) finish(ctx context.Context, k store.EffectKey, result string) (string, error) {
	rec, err := l.ex.FinishEffect(ctx, l.clock.Now(), k, result)
	if err != nil {
		return "", fmt.Errorf("ledger: %w", err)
	}
	return rec.Result, nil
}

// Count returns, for each series of the transaction txn, how many of its
// effects are done.
func (l *Ledger) Count(ctx context.Context, txn string) (map[string]int, error) {
	counts, err := l.ex.CountEffects(ctx, txn)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return counts, nil
}

func keyString(k store.EffectKey) string { return fmt.Sprintf("%s/%s/%d", k.Txn, k.Series, k.Ordinal) }
