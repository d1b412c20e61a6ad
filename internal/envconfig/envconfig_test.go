package envconfig_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/envconfig"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

func TestEventRetryDefaults(t *testing.T) {
	cfg, err := envconfig.EventRetry(envconfig.Map(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxAttempts != 8 || cfg.TTL != 30*time.Minute {
		t.Fatalf("attempts %d ttl %v, want 8 and 30m", cfg.MaxAttempts, cfg.TTL)
	}
	b := cfg.Backoff
	if b.Base != 250*time.Millisecond || b.Factor != 2 || b.Cap != time.Minute || b.Jitter != backoff.JitterFull {
		t.Fatalf("backoff %+v, want 250ms ×2 capped at 60s with full jitter", b)
	}
	// The schedule before jitter: 250ms, 500ms, 1s, ... 32s.
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second}
	for i, w := range want {
		if got := b.Scheduled(i + 1); got != w {
			t.Errorf("retry %d: %v, want %v", i+1, got, w)
		}
	}
	if _, err := retry.New(cfg); err != nil {
		t.Fatalf("default config refused by retry.New: %v", err)
	}
}

// The WEIR_RETRY_* names set the event retry, and so do the spec's
// RETRY_* names (see alias_test.go).
func TestEventRetryOverrides(t *testing.T) {
	for _, prefix := range []string{"WEIR_", ""} {
		cfg, err := envconfig.EventRetry(envconfig.Map(map[string]string{
			prefix + "RETRY_MAX_ATTEMPTS":      "3",
			prefix + "RETRY_BASE_DELAY_MS":     " 100 ",
			prefix + "RETRY_BACKOFF_FACTOR":    "1.5",
			prefix + "RETRY_MAX_DELAY_SECONDS": "10",
			prefix + "RETRY_TTL_MINUTES":       "5",
		}))
		if err != nil {
			t.Fatalf("%sRETRY_*: %v", prefix, err)
		}
		if cfg.MaxAttempts != 3 || cfg.TTL != 5*time.Minute || cfg.Backoff.Base != 100*time.Millisecond ||
			cfg.Backoff.Factor != 1.5 || cfg.Backoff.Cap != 10*time.Second {
			t.Fatalf("%sRETRY_*: got %+v, want their values", prefix, cfg)
		}
	}
}

func TestEventRetryRefusesBadValues(t *testing.T) {
	tests := []struct {
		name, value, want string
	}{
		{"WEIR_RETRY_MAX_ATTEMPTS", "abc", "not a whole number"},
		{"WEIR_RETRY_MAX_ATTEMPTS", "0", "between 1 and"},
		{"WEIR_RETRY_MAX_ATTEMPTS", "-2", "between 1 and"},
		{"WEIR_RETRY_MAX_ATTEMPTS", "99999999999999999999", "not a whole number"},
		{"WEIR_RETRY_BASE_DELAY_MS", "1.5", "not a whole number"},
		{"WEIR_RETRY_BASE_DELAY_MS", "-1", "between 1 and"},
		{"WEIR_RETRY_BASE_DELAY_MS", "0", "between 1 and"},
		{"WEIR_RETRY_BACKOFF_FACTOR", "fast", "not a number"},
		{"WEIR_RETRY_BACKOFF_FACTOR", "0.5", "between 1 and"},
		{"WEIR_RETRY_BACKOFF_FACTOR", "NaN", "not a number"},
		{"WEIR_RETRY_BACKOFF_FACTOR", "+Inf", "not a number"},
		{"WEIR_RETRY_MAX_DELAY_SECONDS", "0", "between 1 and"},
		{"WEIR_RETRY_MAX_DELAY_SECONDS", "60s", "not a whole number"},
		{"WEIR_RETRY_TTL_MINUTES", "0", "between 1 and"},
		{"WEIR_RETRY_TTL_MINUTES", "1e9", "not a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := envconfig.EventRetry(envconfig.Map(map[string]string{tt.name: tt.value}))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.name) || !strings.Contains(msg, `"`+tt.value+`"`) || !strings.Contains(msg, tt.want) {
				t.Fatalf("error %q does not name the variable, the value and %q", msg, tt.want)
			}
			var ee *envconfig.Error
			if !errors.As(err, &ee) || ee.Name != tt.name {
				t.Fatalf("error is not an *envconfig.Error for %s: %#v", tt.name, err)
			}
		})
	}
}

// An error names every variable at fault: each bad one, or both of two
// that disagree (a base delay longer than the cap).
func TestEventRetryNamesEveryVariableAtFault(t *testing.T) {
	for _, env := range []map[string]string{
		{"WEIR_RETRY_MAX_ATTEMPTS": "x", "WEIR_RETRY_BACKOFF_FACTOR": "y"},
		{"WEIR_RETRY_BASE_DELAY_MS": "5000", "WEIR_RETRY_MAX_DELAY_SECONDS": "2"},
	} {
		_, err := envconfig.EventRetry(envconfig.Map(env))
		if err == nil {
			t.Fatalf("%v: no error", env)
		}
		for name := range env {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("%v: error %q does not name %s", env, err, name)
			}
		}
	}
}

func TestOSLookup(t *testing.T) {
	t.Setenv("WEIR_RETRY_MAX_ATTEMPTS", "4")
	cfg, err := envconfig.EventRetry(envconfig.OS)
	if err != nil || cfg.MaxAttempts != 4 {
		t.Fatalf("got %d, %v", cfg.MaxAttempts, err)
	}
}

// Any value of any variable gives either a config retry.New accepts or an
// error naming the variable; never a panic, never a silent fallback.
func FuzzEventRetry(f *testing.F) {
	names := []string{
		envconfig.RetryMaxAttempts, envconfig.RetryBaseDelayMS, envconfig.RetryBackoffFactor,
		envconfig.RetryMaxDelaySeconds, envconfig.RetryTTLMinutes,
		envconfig.RetryMaxAttemptsAlias, envconfig.RetryBaseDelayMSAlias, envconfig.RetryBackoffFactorAlias,
		envconfig.RetryMaxDelaySecondsAlias, envconfig.RetryTTLMinutesAlias,
	}
	for i, v := range []string{"8", "250", "2.0", "60", "30", "", "-1", "0x10", "1e308", "NaN", " 7 ", "９"} {
		f.Add(uint8(i), v)
	}
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		name := names[int(which)%len(names)]
		cfg, err := envconfig.EventRetry(envconfig.Map(map[string]string{name: value}))
		if err != nil {
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("error %q does not name %s", err, name)
			}
			return
		}
		if _, err := retry.New(cfg); err != nil {
			t.Fatalf("%s=%q gave a config retry.New refuses: %v", name, value, err)
		}
		if cfg.MaxAttempts < 1 || cfg.TTL <= 0 || cfg.Backoff.Cap <= 0 {
			t.Fatalf("%s=%q gave %+v", name, value, cfg)
		}
	})
}
