package weir

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// limitKey is the key of the kind's limits: its RateLimitKey, or the
// kind.
func (c KindConfig) limitKey(kind string) string {
	if c.RateLimitKey != "" {
		return c.RateLimitKey
	}
	return kind
}

// limit is the kind's MaxRunning and Rate as the store records them.
func (c KindConfig) limit(kind string) store.LimitParams {
	return store.LimitParams{Key: c.limitKey(kind), Kinds: []string{kind}, MaxRunning: c.MaxRunning, Rate: c.Rate.N, Per: c.Rate.Per}
}

// limited reports whether the kind has a MaxRunning or a Rate.
func (c KindConfig) limited() bool { return c.MaxRunning > 0 || c.Rate != (Rate{}) }

// kindLimits groups the limits of the registered kinds by key, and lists
// the kinds without one. It refuses kinds of one key whose limits differ.
func kindLimits(kinds map[string]*registration) (limits []store.LimitParams, unlimited []string, err error) {
	byKey := map[string]*store.LimitParams{}
	keyOfUnlimited := map[string]string{} // a RateLimitKey of a kind without limits: the kind
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		cfg := kinds[kind].cfg
		if !cfg.limited() {
			unlimited = append(unlimited, kind)
			if cfg.RateLimitKey != "" {
				keyOfUnlimited[cfg.RateLimitKey] = kind
			}
			continue
		}
		p := cfg.limit(kind)
		seen, ok := byKey[p.Key]
		if !ok {
			byKey[p.Key] = &p
			continue
		}
		if seen.MaxRunning != p.MaxRunning || seen.Rate != p.Rate || seen.Per != p.Per {
			return nil, nil, fmt.Errorf("weir: kinds %q and %q share the limit key %q but not its limits "+
				"(MaxRunning %d and %d, Rate %d per %v and %d per %v)",
				seen.Kinds[0], kind, p.Key, seen.MaxRunning, p.MaxRunning, seen.Rate, seen.Per, p.Rate, p.Per)
		}
		seen.Kinds = append(seen.Kinds, kind)
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		if kind, ok := keyOfUnlimited[key]; ok {
			return nil, nil, fmt.Errorf("weir: kinds %q and %q share the limit key %q but not its limits "+
				"(%q gives no MaxRunning or Rate)", byKey[key].Kinds[0], kind, key, kind)
		}
		limits = append(limits, *byKey[key])
	}
	return limits, unlimited, nil
}

// applyLimits records in the store the limits of the client's kinds, and
// removes those of its kinds that give none.
func (c *Client) applyLimits(ctx context.Context) error {
	for _, p := range c.limits {
		if _, err := c.ex.SetLimit(ctx, c.clock.Now(), p); err != nil {
			return fmt.Errorf("weir: Start: record the limit %q: %w", p.Key, err)
		}
	}
	if len(c.unlimited) == 0 {
		return nil
	}
	if _, err := c.ex.Unlimit(ctx, c.unlimited); err != nil {
		return fmt.Errorf("weir: Start: remove the limits of kinds that give none: %w", err)
	}
	return nil
}

// ListLimits returns the limits across processes that the store holds
// (KindConfig.MaxRunning and Rate, as the clients that started last
// recorded them), by key, with the attempts of their kinds running now
// and the starts counted in the current rate window.
func (c *Client) ListLimits(ctx context.Context) ([]*weirtype.Limit, error) {
	ls, err := c.ex.ListLimits(ctx)
	if err != nil {
		return nil, fmt.Errorf("weir: list limits: %w", err)
	}
	return ls, nil
}
