package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Flags after positional arguments are parsed, for every command and
// subcommand; "--" ends the flags.
func TestFlagsAnywhereAmongArguments(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	docs := writeDocs(t, map[string]string{"bees.txt": "Keeping bees\n\nThe hive swarmed in May."})
	code, stdout, stderr := run("ingest", docs, "-data", data, "-source", "home")
	want(t, "ingest PATH -data DIR", code, 0, stdout+stderr, "copied 1 files to "+filepath.Join(data, "incoming", "home"))

	// "weir search word -limit 1" searches for "word" with a limit of 1,
	// not for "word -limit 1".
	code, stdout, stderr = run("search", "hive", "-limit", "1", "-data", data, "-json")
	want(t, "search hive -limit 1 -data DIR -json", code, 0, stdout+stderr, `"title": "Keeping bees"`)
	code, stdout, _ = run("search", "hive", "-data="+data)
	want(t, "search hive -data=DIR", code, 0, stdout, "Keeping bees")
	code, stdout, stderr = run("search", "-data", data, "--", "-limit")
	want(t, "search -- -limit", code, 0, stdout+stderr, `no documents match "-limit"`)
	code, _, stderr = run("search", "hive", "-limit", "0", "-data", data)
	want(t, "search hive -limit 0", code, 2, stderr, "-limit 0: want 1 to 100")
	code, stdout, _ = run("status", "-data", data, "-json")
	want(t, "status -json", code, 0, stdout, `"documents"`)

	code, stdout, _ = run("jobs", "list", "-data", data, "-state", "completed", "-limit", "2")
	want(t, "jobs list -data DIR -state completed", code, 0, stdout, "completed")
	code, stdout, _ = run("jobs", "show", "1", "-data", data)
	want(t, "jobs show 1 -data DIR", code, 0, stdout, `"id": 1`)
	code, stdout, _ = run("jobs", "-data", data, "show", "1")
	want(t, "jobs -data DIR show 1", code, 0, stdout, `"id": 1`)
	code, stdout, _ = run("dlq", "list", "-data", data, "-json")
	want(t, "dlq list -data DIR -json", code, 0, stdout, "")
	code, _, stderr = run("jobs", "show", "1", "-data", data, "-bogus")
	want(t, "jobs show 1 -bogus", code, 2, stderr, "flag provided but not defined: -bogus")
	code, _, stderr = run("jobs", "cancel", "--", "-1")
	want(t, "jobs cancel -- -1", code, 2, stderr, `bad job id "-1"`)
}

// Every bad command line, and every bad WEIR_ value, exits 2 with a
// message that names the flag or the variable and the form wanted; no
// command opens anything first.
func TestBadCommandLinesExitTwo(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		has  []string
	}{
		{[]string{"search", "x", "-limit", "ten", "-data", missing}, []string{"-limit", "want a whole number"}},
		{[]string{"search", "x", "-limit", "1000", "-data", missing}, []string{"-limit 1000", "want 1 to 100"}},
		{[]string{"search", "x", "-json=maybe", "-data", missing}, []string{"-json", "want true or false"}},
		{[]string{"search", "x", "-limit", "-data", missing}, []string{"-limit", "want a whole number"}},
		{[]string{"search", "x", "-limit"}, []string{"flag needs an argument: -limit"}},
		{[]string{"search", "-data", missing}, []string{"want the words to search for"}},
		{[]string{"status", "-stuck-after", "soon", "-data", missing}, []string{"-stuck-after", "want a duration"}},
		{[]string{"status", "-stuck-after", "0s", "-data", missing}, []string{"-stuck-after 0s", "positive"}},
		{[]string{"status", "-data", missing, "-workers", "0"}, []string{"-workers 0", "at least 1"}},
		{[]string{"status", "-data", missing, "-max-attempts", "-1"}, []string{"-max-attempts -1", "at least 1"}},
		{[]string{"status", "-data", missing, "-backoff", "0s"}, []string{"-backoff 0s", "positive"}},
		{[]string{"status", "-data", missing, "-watch-every", "-1s"}, []string{"-watch-every -1s", "positive"}},
		{[]string{"status", "-data", missing, "-reindex-schedule", "sometimes"}, []string{"-reindex-schedule", "sometimes"}},
		{[]string{"status", "-data", missing, "-llm-url", "ftp://x"}, []string{"-llm-url", "http://"}},
		{[]string{"status", "-data", missing, "-schema", strings.Repeat("s", 64)}, []string{"-schema", "63 bytes"}},
		{[]string{"status", "-data", ""}, []string{"-data is empty"}},
		{[]string{"status", "-data", missing, "-id", "a\x1bb"}, []string{"-id", "control characters"}},
		{[]string{"ingest", "-data", missing, "-timeout", "0s", file}, []string{"-timeout 0s", "positive"}},
		{[]string{"ingest", "-data", missing, "-workers", "x", file}, []string{"-workers", "want a whole number"}},
		{[]string{"reindex", "-data", missing, "-backoff", "fast"}, []string{"-backoff", "want a duration"}},
		{[]string{"ingest", "-data", missing, "-source", "a/b", file}, []string{`-source "a/b"`, "plain folder name"}},
		{[]string{"ingest", "-data", missing, "-source", "", file}, []string{`-source ""`, "plain folder name"}},
		{[]string{"migrate", "-data", missing, "-schema", ""}, []string{"-schema is empty"}},
		{[]string{"run", "-data", missing, "-listen", "nonsense"}, []string{`-listen "nonsense" is not host:port`}},
		{[]string{"run", "-data", missing, "-listen", "127.0.0.1:http"}, []string{"-listen", "not a number from 0 to 65535"}},
		{[]string{"run", "-data", missing, "-listen", "127.0.0.1:70000"}, []string{"-listen", "not a number from 0 to 65535"}},
		{[]string{"run", "-data", missing, "-broker", "kafka://x"}, []string{"-broker", "want embedded"}},
		{[]string{"run", "-data", missing, "-broker", "embedded", "-events-topic", ""}, []string{"-events-topic is empty"}},
		{[]string{"run", "-data", missing, "-otlp-endpoint", "ftp://x"}, []string{"-otlp-endpoint", "http://"}},
		{[]string{"run", "-data", missing, "-workers", "0"}, []string{"-workers 0"}},
		{[]string{"run", "-data", missing, "-max-attempts", "0"}, []string{"-max-attempts 0"}},
		{[]string{"dlq", "list", "-data", missing, "-limit", "-1"}, []string{"-limit -1", "0 or more"}},
		{[]string{"dlq", "list", "-data", missing, "-after", "-1"}, []string{"-after -1", "0 or more"}},
		{[]string{"dlq", "list", "-data", missing, "-reason", "boredom"}, []string{"-reason", "boredom"}},
		{[]string{"dlq", "export", "-data", missing, "-limit", "-5"}, []string{"-limit -5", "0 or more"}},
		{[]string{"dlq", "show", "x", "-data", missing}, []string{`bad dead-letter id "x"`}},
		{[]string{"dlq", "purge", "-before", "yesterday", "-yes", "-data", missing}, []string{"-before", "yesterday"}},
		{[]string{"dlq", "-data"}, []string{"flag needs an argument: -data"}},
		{[]string{"jobs", "list", "-data", missing, "-limit", "0"}, []string{"-limit 0", "want 1 to"}},
		{[]string{"jobs", "list", "-data", missing, "-before", "-3"}, []string{"-before -3", "0 or more"}},
		{[]string{"jobs", "list", "-data", missing, "-state", "asleep"}, []string{"-state", "asleep"}},
		{[]string{"jobs", "list", "-data", missing, "-json=2"}, []string{"-json", "want true or false"}},
		{[]string{"jobs", "retry", "-data", missing}, []string{"want at least one job ID"}},
		{[]string{"version", "-x"}, []string{"flag provided but not defined: -x"}},
	} {
		code, stdout, stderr := run(c.args...)
		want(t, "weir "+strings.Join(c.args, " "), code, 2, stdout+stderr, c.has...)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("a bad command line made the data directory: %v", err)
	}
}

func TestBadEnvironmentExitsTwo(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		name, value string
		args        []string
		has         []string
	}{
		{"WEIR_WORKERS", "many", []string{"status"}, []string{`WEIR_WORKERS="many" (-workers): want a whole number`}},
		{"WEIR_WORKERS", "0", []string{"run"}, []string{"-workers 0: want at least 1 (the value of WEIR_WORKERS)"}},
		{"WEIR_MAX_ATTEMPTS", "3.5", []string{"ingest", missing}, []string{"WEIR_MAX_ATTEMPTS", "want a whole number"}},
		{"WEIR_BACKOFF", "5", []string{"status"}, []string{"WEIR_BACKOFF", "want a duration"}},
		{"WEIR_BACKOFF", "-5s", []string{"status"}, []string{"-backoff -5s", "WEIR_BACKOFF"}},
		{"WEIR_WATCH_EVERY", "often", []string{"run"}, []string{"WEIR_WATCH_EVERY", "want a duration"}},
		{"WEIR_LISTEN", "nonsense", []string{"run"}, []string{"not host:port", "WEIR_LISTEN"}},
		{"WEIR_LISTEN", "0.0.0.0:8080", []string{"run"}, []string{"not a loopback address", "WEIR_LISTEN"}},
		{"WEIR_BROKER", "kafka://x", []string{"run"}, []string{"-broker", "WEIR_BROKER"}},
		{"WEIR_OTLP_ENDPOINT", "collector:4318", []string{"run"}, []string{"-otlp-endpoint", "WEIR_OTLP_ENDPOINT"}},
		{"WEIR_REINDEX_SCHEDULE", "whenever", []string{"status"}, []string{"-reindex-schedule", "WEIR_REINDEX_SCHEDULE"}},
		{"WEIR_LLM_URL", "not a url", []string{"search", "x"}, []string{"-llm-url", "WEIR_LLM_URL"}},
		{"WEIR_STORE", "mysql://root:hunter2@db/weir", []string{"dlq", "list"}, []string{"-store", "unsupported scheme", "WEIR_STORE"}},
		{"WEIR_STORE", "mysql://db/weir", []string{"search", "x"}, []string{"-store", "WEIR_STORE"}},
		{"WEIR_SCHEMA", strings.Repeat("x", 70), []string{"jobs", "list"}, []string{"-schema", "WEIR_SCHEMA"}},
		{"WEIR_DATA", "", []string{"status"}, []string{"-data is empty", "WEIR_DATA"}},
		{"WEIR_SOURCE", "x", []string{"ingest", "-timeout", "-1s", missing}, []string{"-timeout -1s"}},
		{"WEIR_TIMEOUT", "forever", []string{"ingest", missing}, []string{"WEIR_TIMEOUT", "want a duration"}},
		{"WEIR_LIMIT", "lots", []string{"search", "x"}, []string{"WEIR_LIMIT", "want a whole number"}},
		{"WEIR_JSON", "sure", []string{"status"}, []string{"WEIR_JSON", "want true or false"}},
		{"WEIR_STUCK_AFTER", "0", []string{"status"}, []string{"-stuck-after 0s", "WEIR_STUCK_AFTER"}},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			t.Setenv("WEIR_DATA", missing)
			t.Setenv(c.name, c.value)
			code, stdout, stderr := run(c.args...)
			want(t, c.name+"="+c.value+" weir "+strings.Join(c.args, " "), code, 2, stdout+stderr, c.has...)
			if strings.Contains(stdout+stderr, "hunter2") {
				t.Errorf("the message repeats a password: %s", stderr)
			}
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("a bad variable let a command make the data directory: %v", err)
	}
}

// A usage error about a URL never repeats its password.
func TestUsageErrorsHideURLPasswords(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, args := range [][]string{
		{"run", "-data", missing, "-otlp-endpoint", "ftp://weir:hunter2@collector:4318"},
		{"run", "-data", missing, "-otlp-endpoint", "http://weir:hunter2@"},
		{"run", "-data", missing, "-broker", "kafka://weir:hunter2@broker:9092"},
		{"status", "-data", missing, "-llm-url", "ftp://weir:hunter2@llm/v1"},
	} {
		code, stdout, stderr := run(args...)
		if code != 2 || strings.Contains(stdout+stderr, "hunter2") || !strings.Contains(stderr, "weir:") {
			t.Errorf("weir %v: exit %d, %q: want 2, the URL with its password masked", args, code, stderr)
		}
	}
	t.Setenv("WEIR_OTLP_ENDPOINT", "ftp://weir:hunter2@collector:4318")
	code, _, stderr := run("run", "-data", missing)
	if code != 2 || strings.Contains(stderr, "hunter2") || !strings.Contains(stderr, "WEIR_OTLP_ENDPOINT") {
		t.Errorf("WEIR_OTLP_ENDPOINT with a password: exit %d, %q", code, stderr)
	}
}

// weir run refuses to serve the admin API to the network without a token,
// before it opens anything.
func TestRunRefusesNonLoopbackWithoutToken(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "192.168.1.10:80", "example.com:80"} {
		code, stdout, stderr := run("run", "-data", data, "-listen", listen)
		want(t, "run -listen "+listen, code, 2, stdout+stderr, "is not a loopback address", "-admin-token", "WEIR_ADMIN_TOKEN")
	}
	code, stdout, stderr := run("run", "-data", data, "-listen", "nonsense")
	want(t, "run -listen nonsense", code, 2, stdout+stderr, `-listen "nonsense" is not host:port`)
	// With a token, or on loopback, the check passes: the run goes on to
	// the next check, of -max-attempts.
	for _, args := range [][]string{
		{"-listen", "0.0.0.0:0", "-admin-token", "s3cret-0123456789"},
		{"-listen", "127.0.0.1:0", "-admin-token", "short"},
		{"-listen", "127.0.0.1:0"},
		{"-listen", "localhost:0"},
		{"-listen", "[::1]:0"},
	} {
		code, stdout, stderr := run(append(append([]string{"run", "-data", data}, args...), "-max-attempts", "0")...)
		want(t, "run "+strings.Join(args, " "), code, 2, stdout+stderr, "-max-attempts")
	}
	// Off loopback, a token must be long enough, and without surrounding
	// whitespace.
	for token, rule := range map[string]string{
		"s3cret":                "at least 16 bytes",
		"0123456789abcde":       "at least 16 bytes",
		" 0123456789abcdef":     "whitespace",
		"0123456789abcdef\n":    "whitespace",
		"0123456789abcdef\t   ": "whitespace",
	} {
		code, stdout, stderr := run("run", "-data", data, "-listen", "0.0.0.0:0", "-admin-token", token, "-max-attempts", "0")
		want(t, fmt.Sprintf("run -admin-token %q", token), code, 2, stdout+stderr, "is not a loopback address", "-admin-token", rule)
	}
	// The token may come from WEIR_ADMIN_TOKEN, checked alike.
	t.Setenv("WEIR_ADMIN_TOKEN", "s3cret")
	code, stdout, stderr = run("run", "-data", data, "-listen", "0.0.0.0:0", "-max-attempts", "0")
	want(t, "run with a short WEIR_ADMIN_TOKEN", code, 2, stdout+stderr, "at least 16 bytes")
	t.Setenv("WEIR_ADMIN_TOKEN", "s3cret-0123456789")
	code, stdout, stderr = run("run", "-data", data, "-listen", "0.0.0.0:0", "-max-attempts", "0")
	want(t, "run with WEIR_ADMIN_TOKEN", code, 2, stdout+stderr, "-max-attempts")
}
