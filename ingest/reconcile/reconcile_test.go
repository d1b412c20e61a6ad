package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/reconcile"
)

// side is an in-memory side of a reconciliation: id → updated at.
type side map[string]time.Time

func (s side) Entries(_ context.Context, after string, limit int) ([]reconcile.Entry, error) {
	ids := slices.Sorted(maps.Keys(s))
	var out []reconcile.Entry
	for _, id := range ids {
		if id > after && len(out) < limit {
			out = append(out, reconcile.Entry{ID: id, UpdatedAt: s[id]})
		}
	}
	return out, nil
}

// After a run with Remove, the index equals the source, whatever the two
// held and whatever the batch; the counts say what differed.
func TestRunRepairsEveryDrift(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		src, idx := side{}, side{}
		var missing, stale, extra int
		for i := range rng.IntN(400) {
			id := fmt.Sprintf("%04x", rng.IntN(1<<16))
			at := base.Add(time.Duration(i) * time.Minute)
			if src[id] != (time.Time{}) {
				continue
			}
			src[id] = at
			switch rng.IntN(4) {
			case 0:
				missing++
			case 1:
				idx[id] = at.Add(-time.Second)
				stale++
			default:
				idx[id] = at
			}
		}
		for range rng.IntN(30) {
			id := fmt.Sprintf("x%03d", rng.IntN(1000))
			if _, ok := idx[id]; !ok {
				idx[id] = base
				extra++
			}
		}
		batch := 1 + rng.IntN(150)
		repairs := 0
		p, err := reconcile.Run(context.Background(), reconcile.Config{Source: src, Index: idx, Batch: batch,
			Repair: func(_ context.Context, ids []string) error {
				if len(ids) > batch {
					return fmt.Errorf("a repair of %d, over the batch %d", len(ids), batch)
				}
				repairs++
				for _, id := range ids {
					idx[id] = src[id]
				}
				return nil
			},
			Remove: func(_ context.Context, ids []string) error {
				for _, id := range ids {
					delete(idx, id)
				}
				return nil
			}})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !maps.Equal(src, idx) {
			t.Fatalf("seed %d: the index differs from the source after the run", seed)
		}
		if p.Checked != len(src) || p.Missing != missing || p.Stale != stale || p.Extra != extra || p.Repaired != missing+stale || p.Removed != extra {
			t.Fatalf("seed %d: progress %+v; want checked %d missing %d stale %d extra %d", seed, p, len(src), missing, stale, extra)
		}
	}
}

// A run stopped by its progress callback can be resumed from the last id
// it reported, and the resumed run finishes the repair.
func TestRunResumesAfterLastID(t *testing.T) {
	src, idx := side{}, side{}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 250 {
		src[fmt.Sprintf("%03d", i)] = at
	}
	repair := func(_ context.Context, ids []string) error {
		for _, id := range ids {
			idx[id] = src[id]
		}
		return nil
	}
	stop := errors.New("stopped")
	p, err := reconcile.Run(context.Background(), reconcile.Config{Source: src, Index: idx, Repair: repair,
		Progress: func(p reconcile.Progress) error {
			if p.Checked >= 100 {
				return stop
			}
			return nil
		}})
	if !errors.Is(err, stop) || p.LastID != "099" || len(idx) != 100 {
		t.Fatalf("first run: %v, last id %q, %d repaired; want stopped after 099 with 100 repaired", err, p.LastID, len(idx))
	}
	p, err = reconcile.Run(context.Background(), reconcile.Config{Source: src, Index: idx, Repair: repair, After: p.LastID})
	if err != nil || p.Missing != 150 || len(idx) != 250 || p.LastID != "249" {
		t.Fatalf("resumed run: %+v, %v; want the other 150 repaired", p, err)
	}
}

func TestRunRefusesDisorder(t *testing.T) {
	bad := reconcile.ListFunc(func(context.Context, string, int) ([]reconcile.Entry, error) {
		return []reconcile.Entry{{ID: "b"}, {ID: "a"}}, nil
	})
	_, err := reconcile.Run(context.Background(), reconcile.Config{Source: bad, Index: side{}, Repair: func(context.Context, []string) error { return nil }})
	if err == nil {
		t.Fatal("a source out of order was accepted")
	}
}

// Progress moves every batch of checks even when a few entries of each
// batch need repair: a run stopped midway resumes after its last batch,
// not from the start.
func TestProgressEveryBatchWithScatteredDrift(t *testing.T) {
	src, idx := side{}, side{}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 300 {
		id := fmt.Sprintf("%03d", i)
		src[id] = at
		if i%10 != 0 { // one in ten missing
			idx[id] = at
		}
	}
	var reports []reconcile.Progress
	_, err := reconcile.Run(context.Background(), reconcile.Config{Source: src, Index: idx, Batch: 100,
		Repair: func(_ context.Context, ids []string) error {
			for _, id := range ids {
				idx[id] = src[id]
			}
			return nil
		},
		Progress: func(p reconcile.Progress) error {
			reports = append(reports, p)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) < 3 || reports[0].Checked != 100 || reports[0].LastID != "099" || reports[0].Repaired != 10 {
		t.Fatalf("reports %+v; want one per 100 checked, the first after 099 with its 10 repaired", reports)
	}
}
