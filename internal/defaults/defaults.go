// Package defaults fills the zero fields of a component's Config with
// their defaults and refuses negative ones, naming the field, as every
// Config in weir does for its counts and durations.
//
// Set handles one field; cmp.Or of several Set calls returns the first
// field's error, every default having been filled:
//
//	if err := cmp.Or(
//		defaults.Set("outbox: Config.Batch", &cfg.Batch, DefaultBatch),
//		defaults.Set("outbox: Config.PollEvery", &cfg.PollEvery, DefaultPollEvery),
//	); err != nil {
//		return nil, err
//	}
package defaults

import "fmt"

// Number is a field that Set fills: a count, a byte size or a duration.
type Number interface {
	~int | ~int64
}

// Set sets *v to def when it is zero, and returns an error, "<name>
// <value> is negative", when it is negative.
func Set[T Number](name string, v *T, def T) error {
	switch {
	case *v < 0:
		return fmt.Errorf("%s %v is negative", name, *v)
	case *v == 0:
		*v = def
	}
	return nil
}
