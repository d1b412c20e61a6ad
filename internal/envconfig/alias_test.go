package envconfig_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/envconfig"
)

// When both names of a setting are set, the WEIR_ one wins; a blank WEIR_
// one counts as unset.
func TestEventRetryWEIRNameWins(t *testing.T) {
	cfg, err := envconfig.EventRetry(envconfig.Map(map[string]string{
		"WEIR_RETRY_MAX_ATTEMPTS":   "4",
		"RETRY_MAX_ATTEMPTS":        "9",
		"WEIR_RETRY_TTL_MINUTES":    " ",
		"RETRY_TTL_MINUTES":         "12",
		"WEIR_RETRY_BACKOFF_FACTOR": "3",
		"RETRY_BACKOFF_FACTOR":      "not used",
	}))
	if err != nil {
		t.Fatalf("%v: a RETRY_ value the WEIR_ one overrides is not read", err)
	}
	if cfg.MaxAttempts != 4 || cfg.TTL != 12*time.Minute || cfg.Backoff.Factor != 3 {
		t.Fatalf("got %d attempts, ttl %v, factor %v; want 4, 12m, 3", cfg.MaxAttempts, cfg.TTL, cfg.Backoff.Factor)
	}
	name, value, ok := envconfig.EventRetryVars()[0].Lookup(envconfig.Map(map[string]string{"RETRY_MAX_ATTEMPTS": "9"}))
	if name != "RETRY_MAX_ATTEMPTS" || value != "9" || !ok {
		t.Fatalf("Lookup = %q %q %v, want the alias's", name, value, ok)
	}
}

// A bad value is named by the variable it was read from.
func TestEventRetryNamesTheSpecVariable(t *testing.T) {
	for name, value := range map[string]string{
		"RETRY_MAX_ATTEMPTS":      "many",
		"RETRY_BASE_DELAY_MS":     "0",
		"RETRY_BACKOFF_FACTOR":    "NaN",
		"RETRY_MAX_DELAY_SECONDS": "1m",
		"RETRY_TTL_MINUTES":       "-3",
	} {
		_, err := envconfig.EventRetry(envconfig.Map(map[string]string{name: value}))
		var ee *envconfig.Error
		if !errors.As(err, &ee) || ee.Name != name || strings.Contains(err.Error(), "WEIR_") {
			t.Errorf("%s=%q: %v, want an error naming %s", name, value, err, name)
		}
	}
	_, err := envconfig.EventRetry(envconfig.Map(map[string]string{"RETRY_BASE_DELAY_MS": "5000", "RETRY_MAX_DELAY_SECONDS": "2"}))
	if err == nil || !strings.Contains(err.Error(), "RETRY_BASE_DELAY_MS") || !strings.Contains(err.Error(), "RETRY_MAX_DELAY_SECONDS") || strings.Contains(err.Error(), "WEIR_") {
		t.Fatalf("base past the cap: %v, want both RETRY_ names", err)
	}
}
