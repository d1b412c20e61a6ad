package envconfig

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/eventretry"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

// Lookup returns the value of an environment variable and whether it is
// set, as os.LookupEnv does.
type Lookup func(name string) (string, bool)

// OS looks up the process environment.
func OS(name string) (string, bool) { return os.LookupEnv(name) }

// Map returns a Lookup over a fixed set of variables, for tests.
func Map(vars map[string]string) Lookup {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// The event-retry variables and their defaults.
const (
	RetryMaxAttempts     = "WEIR_RETRY_MAX_ATTEMPTS"      // default 8
	RetryBaseDelayMS     = "WEIR_RETRY_BASE_DELAY_MS"     // default 250
	RetryBackoffFactor   = "WEIR_RETRY_BACKOFF_FACTOR"    // default 2.0
	RetryMaxDelaySeconds = "WEIR_RETRY_MAX_DELAY_SECONDS" // default 60
	RetryTTLMinutes      = "WEIR_RETRY_TTL_MINUTES"       // default 30
)

// The names weir's event-retry spec gives the same settings. Each is read
// when its WEIR_RETRY_* variable is unset or blank; when both are set, the
// WEIR_ one wins.
const (
	RetryMaxAttemptsAlias     = "RETRY_MAX_ATTEMPTS"
	RetryBaseDelayMSAlias     = "RETRY_BASE_DELAY_MS"
	RetryBackoffFactorAlias   = "RETRY_BACKOFF_FACTOR"
	RetryMaxDelaySecondsAlias = "RETRY_MAX_DELAY_SECONDS"
	RetryTTLMinutesAlias      = "RETRY_TTL_MINUTES"
)

// Var is a setting's variable and the other name it is also read from.
type Var struct {
	Name, Alias string
}

// EventRetryVars returns the event-retry settings' variables, in the
// order of the README's table: max attempts, base delay, backoff factor,
// max delay, TTL.
func EventRetryVars() []Var {
	return []Var{
		{RetryMaxAttempts, RetryMaxAttemptsAlias},
		{RetryBaseDelayMS, RetryBaseDelayMSAlias},
		{RetryBackoffFactor, RetryBackoffFactorAlias},
		{RetryMaxDelaySeconds, RetryMaxDelaySecondsAlias},
		{RetryTTLMinutes, RetryTTLMinutesAlias},
	}
}

// Lookup returns the setting's value and the name it was read from: Name
// when set and not blank, else Alias when set and not blank; "" and ok
// false when neither is.
func (v Var) Lookup(env Lookup) (name, value string, ok bool) {
	for _, n := range []string{v.Name, v.Alias} {
		if n == "" {
			continue
		}
		if raw, set := env(n); set && strings.TrimSpace(raw) != "" {
			return n, raw, true
		}
	}
	return "", "", false
}

// Event-retry defaults, in the units of the variables: those of package
// eventretry.
const (
	DefaultRetryMaxAttempts     = eventretry.DefaultMaxAttempts
	DefaultRetryBaseDelayMS     = int(eventretry.DefaultBaseDelay / time.Millisecond)
	DefaultRetryBackoffFactor   = eventretry.DefaultBackoffFactor
	DefaultRetryMaxDelaySeconds = int(eventretry.DefaultMaxDelay / time.Second)
	DefaultRetryTTLMinutes      = int(eventretry.DefaultTTL / time.Minute)
)

// Upper limits that keep a typo from meaning "retry for a century".
const (
	maxAttempts  = 1000
	maxDelay     = 24 * time.Hour
	maxTTL       = 30 * 24 * time.Hour
	maxFactor    = 100.0
	maxBaseDelay = time.Hour
	// A zero base delay would retry back to back: a hot loop.
	minBaseDelayMS = 1
	minTTLMinutes  = 1
)

// Error is a refused variable.
type Error struct {
	Name, Value string
	Reason      string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Name, e.Value, e.Reason)
}

// EventRetry returns the retry config for event handlers, from the
// WEIR_RETRY_* variables (or the spec's RETRY_* names, see
// EventRetryVars) over their defaults. Every bad variable is reported,
// under the name it was read from, joined in one error.
func EventRetry(env Lookup) (retry.Config, error) {
	var errs []error
	v := EventRetryVars()
	attempts := intVar(env, v[0], DefaultRetryMaxAttempts, 1, maxAttempts, "attempts", &errs)
	baseMS := intVar(env, v[1], DefaultRetryBaseDelayMS, minBaseDelayMS, int(maxBaseDelay/time.Millisecond), "milliseconds", &errs)
	factor := floatVar(env, v[2], DefaultRetryBackoffFactor, 1, maxFactor, &errs)
	capS := intVar(env, v[3], DefaultRetryMaxDelaySeconds, 1, int(maxDelay/time.Second), "seconds", &errs)
	ttlM := intVar(env, v[4], DefaultRetryTTLMinutes, minTTLMinutes, int(maxTTL/time.Minute), "minutes", &errs)
	if err := errors.Join(errs...); err != nil {
		return retry.Config{}, err
	}
	base := time.Duration(baseMS) * time.Millisecond
	capd := time.Duration(capS) * time.Second
	if base > capd {
		baseName, _, _ := v[1].Lookup(env)
		capName, _, ok := v[3].Lookup(env)
		if !ok {
			capName = RetryMaxDelaySeconds
		}
		return retry.Config{}, &Error{Name: baseName, Value: strconv.Itoa(baseMS),
			Reason: fmt.Sprintf("base delay %v is longer than %s (%v)", base, capName, capd)}
	}
	return retry.Config{
		MaxAttempts: attempts,
		TTL:         time.Duration(ttlM) * time.Minute,
		Backoff:     backoff.Exponential(base, factor, capd).WithJitter(backoff.JitterFull),
	}, nil
}

func intVar(env Lookup, v Var, def, lo, hi int, unit string, errs *[]error) int {
	name, raw, ok := v.Lookup(env)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil {
		*errs = append(*errs, &Error{Name: name, Value: raw, Reason: fmt.Sprintf("not a whole number of %s", unit)})
		return def
	}
	if n < lo || n > hi {
		*errs = append(*errs, &Error{Name: name, Value: raw, Reason: fmt.Sprintf("must be between %d and %d %s", lo, hi, unit)})
		return def
	}
	return n
}

func floatVar(env Lookup, v Var, def, lo, hi float64, errs *[]error) float64 {
	name, raw, ok := v.Lookup(env)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		*errs = append(*errs, &Error{Name: name, Value: raw, Reason: "not a number"})
		return def
	}
	if f < lo || f > hi {
		*errs = append(*errs, &Error{Name: name, Value: raw, Reason: fmt.Sprintf("must be between %g and %g", lo, hi)})
		return def
	}
	return f
}
