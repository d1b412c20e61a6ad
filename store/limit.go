package store

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/weirtype"
)

// Limits keeps the limits across processes on the attempts of kinds: at
// most MaxRunning attempts running at once, at most Rate starts in each
// window of Per. Each limit has a key, and the kinds that count against
// it; a kind counts against one limit at most.
//
// Claim obeys them: it takes a waiting job of a limited kind only while
// the attempts of the limit's kinds running, in any queue and by any
// process, are fewer than MaxRunning, and the attempts of those kinds
// started in the current window of Per (windows aligned to multiples of
// Per since the Unix epoch, on the claiming caller's clock) are fewer
// than Rate; each job claimed counts at once, so concurrent claims never
// take more than the limit allows between them. The jobs of the limited
// kinds are claimed before the others of the queue, in claim order among
// themselves; a breaker's probe counts against its kind's limit as any
// attempt does.
type Limits interface {
	// SetLimit records the limit p at now and returns it: it replaces
	// the limits of p.Key (keeping its rate window's count while Per is
	// unchanged) and makes each of p.Kinds count against it, moving a
	// kind from any other limit (a limit left without kinds is removed).
	SetLimit(ctx context.Context, now time.Time, p LimitParams) (*weirtype.Limit, error)

	// Unlimit makes kinds count against no limit (removing the limits
	// left without kinds) and returns how many of them did. A kind that
	// counts against none is no error.
	Unlimit(ctx context.Context, kinds []string) (int, error)

	// ListLimits returns the limits, by key, with the attempts of their
	// kinds running now.
	ListLimits(ctx context.Context) ([]*weirtype.Limit, error)
}

// Bounds of LimitParams.
const (
	// MaxLimitName bounds the length of a limit's key and kinds, in bytes.
	MaxLimitName = 200
	// MinLimitPer and MaxLimitPer bound a rate's window.
	MinLimitPer = time.Millisecond
	MaxLimitPer = 24 * time.Hour
	// MaxLimitKinds bounds how many kinds one SetLimit names.
	MaxLimitKinds = 1000
)

// LimitParams is a limit to record.
type LimitParams struct {
	// Key names the limit. Required.
	Key string
	// Kinds are the kinds that count against it: at least one.
	Kinds []string
	// MaxRunning is how many attempts of Kinds may run at once across
	// every process; 0 means no such limit.
	MaxRunning int
	// Rate is how many attempts of Kinds may start in each window of
	// Per; 0 means no such limit. Per is required with a Rate, from 1 ms
	// to 24 h, and must be a whole number of microseconds.
	Rate int
	Per  time.Duration
}

// Normalize returns p with its kinds sorted and each once, or an error
// wrapping ErrInvalid that names the bad field. A limit of neither
// MaxRunning nor Rate is refused: Unlimit removes one.
func (p LimitParams) Normalize() (LimitParams, error) {
	if err := checkLimitName("key", p.Key); err != nil {
		return p, err
	}
	if len(p.Kinds) == 0 {
		return p, invalidf("limit %q: no kinds named", p.Key)
	}
	if len(p.Kinds) > MaxLimitKinds {
		return p, invalidf("limit %q: %d kinds, more than %d", p.Key, len(p.Kinds), MaxLimitKinds)
	}
	p.Kinds = slices.Clone(p.Kinds)
	slices.Sort(p.Kinds)
	p.Kinds = slices.Compact(p.Kinds)
	for _, k := range p.Kinds {
		if err := checkLimitName("kind", k); err != nil {
			return p, fmt.Errorf("limit %q: %w", p.Key, err)
		}
	}
	switch {
	case p.MaxRunning < 0:
		return p, invalidf("limit %q: max running %d is negative", p.Key, p.MaxRunning)
	case p.Rate < 0:
		return p, invalidf("limit %q: rate %d is negative", p.Key, p.Rate)
	case p.Rate == 0 && p.Per != 0:
		return p, invalidf("limit %q: per %v is set without a rate", p.Key, p.Per)
	case p.MaxRunning == 0 && p.Rate == 0:
		return p, invalidf("limit %q: neither max running nor rate is set (Unlimit removes a limit)", p.Key)
	case p.Rate > 0 && (p.Per < MinLimitPer || p.Per > MaxLimitPer):
		return p, invalidf("limit %q: per %v is outside %v to %v", p.Key, p.Per, MinLimitPer, MaxLimitPer)
	case p.Per%time.Microsecond != 0:
		return p, invalidf("limit %q: per %v is not a whole number of microseconds", p.Key, p.Per)
	}
	return p, nil
}

// CheckUnlimit refuses an Unlimit of no kinds, or of a kind that is empty,
// too long or not UTF-8.
func CheckUnlimit(kinds []string) error {
	if len(kinds) == 0 {
		return invalidf("unlimit: no kinds named")
	}
	if len(kinds) > MaxLimitKinds {
		return invalidf("unlimit: %d kinds, more than %d", len(kinds), MaxLimitKinds)
	}
	for _, k := range kinds {
		if err := checkLimitName("kind", k); err != nil {
			return fmt.Errorf("unlimit: %w", err)
		}
	}
	return nil
}

func checkLimitName(field, v string) error {
	switch {
	case v == "":
		return invalidf("%s is empty", field)
	case len(v) > MaxLimitName:
		return invalidf("%s is %d bytes long, more than %d", field, len(v), MaxLimitName)
	case !utf8.ValidString(v):
		return invalidf("%s is not valid UTF-8", field)
	}
	return nil
}

// LimitWindow returns the start of the rate window of per that holds
// now: the last multiple of per since the Unix epoch not after now.
func LimitWindow(now time.Time, per time.Duration) time.Time {
	us, p := now.UnixMicro(), per.Microseconds()
	w := us - us%p
	if us%p < 0 {
		w -= p
	}
	return time.UnixMicro(w).UTC()
}

// LimitRoom returns how many more attempts l lets start at now, given the
// attempts of its kinds running: at most want, and never below 0. A
// window that started before now's is counted as empty; one after it (a
// claimer whose clock runs ahead counted it) as the current one.
func LimitRoom(l *weirtype.Limit, now time.Time, want int) int {
	room := want
	if l.MaxRunning > 0 {
		room = min(room, l.MaxRunning-l.Running)
	}
	if l.Rate > 0 {
		started := l.WindowStarts
		if l.WindowStart.IsZero() || l.WindowStart.Before(LimitWindow(now, l.Per)) {
			started = 0
		}
		room = min(room, l.Rate-started)
	}
	return max(room, 0)
}
