package weirtype

import "time"

// Limit is a limit across processes on the attempts of some kinds: at
// most MaxRunning running at once, and at most Rate started in each
// window of Per, counted by the claim in the store.
type Limit struct {
	// Key names the limit: the kinds' rate-limit key, or the kind itself.
	Key string
	// Kinds are the kinds whose attempts count against the limit, sorted.
	Kinds []string
	// MaxRunning is how many attempts of Kinds may run at once across
	// every process; 0 means no such limit.
	MaxRunning int
	// Rate is how many attempts of Kinds may start in each window of
	// Per; 0 means no such limit.
	Rate int
	// Per is the rate's window. The windows are aligned to the store's
	// clock in multiples of Per since the Unix epoch.
	Per time.Duration
	// Running is how many attempts of Kinds were running when the limit
	// was read.
	Running int
	// WindowStart is the start of the rate window last counted, and
	// WindowStarts how many attempts started in it; zero until an
	// attempt of Kinds starts under a rate.
	WindowStart  time.Time
	WindowStarts int
	// UpdatedAt is when the limit was last set.
	UpdatedAt time.Time
}
