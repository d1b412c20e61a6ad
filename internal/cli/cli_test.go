package cli

import (
	"bytes"
	"errors"
	"flag"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/crashpoint"
)

func run(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestMainPaths(t *testing.T) {
	usage, err := usageString()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // exact unless empty and stdoutHas is set
		stdoutHas  []string
		wantStderr string // exact
	}{
		{name: "no arguments", args: nil, wantCode: 0, wantStdout: usage},
		{name: "help", args: []string{"help"}, wantCode: 0, wantStdout: usage},
		{name: "-h", args: []string{"-h"}, wantCode: 0, wantStdout: usage},
		{name: "-help", args: []string{"-help"}, wantCode: 0, wantStdout: usage},
		{name: "--help", args: []string{"--help"}, wantCode: 0, wantStdout: usage},
		{
			name:       "unknown command",
			args:       []string{"x"},
			wantCode:   2,
			wantStderr: "weir: unknown command \"x\"\nRun 'weir help' for usage.\n",
		},
		{
			name:       "unknown command with arguments",
			args:       []string{"frobnicate", "-v", "now"},
			wantCode:   2,
			wantStderr: "weir: unknown command \"frobnicate\"\nRun 'weir help' for usage.\n",
		},
		{
			name:       "unknown top-level flag",
			args:       []string{"-x"},
			wantCode:   2,
			wantStderr: "weir: flag provided but not defined: -x\nRun 'weir help' for usage.\n",
		},
		{
			name:      "version",
			args:      []string{"version"},
			wantCode:  0,
			stdoutHas: []string{"weir ", "\ngo: " + runtime.Version() + " "},
		},
		{
			name:      "version -h",
			args:      []string{"version", "-h"},
			wantCode:  0,
			stdoutHas: []string{"usage: weir version\n", "Go version"},
		},
		{
			name:      "help version",
			args:      []string{"help", "version"},
			wantCode:  0,
			stdoutHas: []string{"usage: weir version\n", "Go version"},
		},
		{
			name:      "help help",
			args:      []string{"help", "help"},
			wantCode:  0,
			stdoutHas: []string{"usage: weir help [command]\n"},
		},
		{
			name:     "version with an argument",
			args:     []string{"version", "extra"},
			wantCode: 2,
			wantStderr: "weir version: unexpected argument \"extra\"\n" +
				"usage: weir version\nRun 'weir help version' for usage.\n",
		},
		{
			name:     "version with an unknown flag",
			args:     []string{"version", "-json"},
			wantCode: 2,
			wantStderr: "weir version: flag provided but not defined: -json\n" +
				"usage: weir version\nRun 'weir help version' for usage.\n",
		},
		{
			name:     "help for an unknown command",
			args:     []string{"help", "x"},
			wantCode: 2,
			wantStderr: "weir help: unknown command \"x\"\n" +
				"usage: weir help [command]\nRun 'weir help help' for usage.\n",
		},
		{
			name:     "help with two commands",
			args:     []string{"help", "version", "help"},
			wantCode: 2,
			wantStderr: "weir help: too many arguments: [\"help\"]\n" +
				"usage: weir help [command]\nRun 'weir help help' for usage.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", code, tt.wantCode)
			}
			if tt.stdoutHas == nil && stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout, tt.wantStdout)
			}
			for _, s := range tt.stdoutHas {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout = %q, want it to contain %q", stdout, s)
				}
			}
			if stderr != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr, tt.wantStderr)
			}
		})
	}
}

func usageString() (string, error) {
	var b strings.Builder
	err := writeUsage(&b)
	return b.String(), err
}

func TestUsageListsEveryCommand(t *testing.T) {
	_, stdout, _ := run()
	if !strings.HasPrefix(stdout, tagline+"\n") {
		t.Errorf("usage does not start with the tagline:\n%s", stdout)
	}
	for _, c := range commands() {
		if !strings.Contains(stdout, "\t"+c.name+" ") {
			t.Errorf("usage does not list %q:\n%s", c.name, stdout)
		}
	}
}

func TestCommandTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commands() {
		if c.name == "" || c.summary == "" || c.setup == nil {
			t.Errorf("command %+v lacks a name, summary or setup", c)
		}
		if !strings.HasPrefix(c.usage, "weir "+c.name) {
			t.Errorf("command %q: usage %q does not start with %q", c.name, c.usage, "weir "+c.name)
		}
		if seen[c.name] {
			t.Errorf("command %q listed twice", c.name)
		}
		seen[c.name] = true
	}
}

func TestVersionFirstLine(t *testing.T) {
	code, stdout, stderr := run("version")
	if code != 0 || stderr != "" {
		t.Fatalf("weir version: code %d, stderr %q", code, stderr)
	}
	first, _, _ := strings.Cut(stdout, "\n")
	want := "weir " + Version
	if bi, ok := debug.ReadBuildInfo(); ok && Version == "dev" &&
		bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		want = "weir " + bi.Main.Version
	}
	if first != want {
		t.Errorf("first line = %q, want %q", first, want)
	}
}

func TestVersionText(t *testing.T) {
	goLine := "go: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name    string
		version string
		bi      *debug.BuildInfo
		want    string
	}{
		{
			name:    "no build info",
			version: "dev",
			bi:      nil,
			want:    "weir dev\n" + goLine,
		},
		{
			name:    "no vcs",
			version: "v1.2.3",
			bi:      &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			want:    "weir v1.2.3\n" + goLine,
		},
		{
			name:    "clean revision",
			version: "v1.2.3",
			bi: &debug.BuildInfo{Settings: vcs(
				"vcs", "git",
				"vcs.revision", "0123456789abcdef0123456789abcdef01234567",
				"vcs.time", "2026-11-22T16:55:00Z",
				"vcs.modified", "false")},
			want: "weir v1.2.3\n" + goLine +
				"revision: 0123456789abcdef0123456789abcdef01234567 2026-11-22T16:55:00Z\n",
		},
		{
			name:    "modified revision without time",
			version: "dev",
			bi:      &debug.BuildInfo{Settings: vcs("vcs.revision", "abc", "vcs.modified", "true")},
			want:    "weir dev\n" + goLine + "revision: abc (modified)\n",
		},
		{
			name:    "module version replaces dev",
			version: "dev",
			bi:      &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}},
			want:    "weir v0.4.0\n" + goLine,
		},
		{
			name:    "ldflags version wins over module version",
			version: "v0.5.0-rc1",
			bi:      &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}},
			want:    "weir v0.5.0-rc1\n" + goLine,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := versionText(tt.version, tt.bi); got != tt.want {
				t.Errorf("versionText = %q, want %q", got, tt.want)
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriteErrorExitsOne(t *testing.T) {
	for _, args := range [][]string{nil, {"help"}, {"-h"}, {"version"}, {"help", "version"}} {
		var errOut bytes.Buffer
		code := Main(args, failingWriter{}, &errOut)
		if code != 1 {
			t.Errorf("Main(%q) with a failing stdout: exit code %d, want 1", args, code)
		}
		if !strings.Contains(errOut.String(), "broken pipe") {
			t.Errorf("Main(%q) with a failing stdout: stderr %q does not name the error", args, errOut.String())
		}
	}
}

func TestConfigPrintsDefaults(t *testing.T) {
	for _, name := range []string{"WEIR_RETRY_MAX_ATTEMPTS", "WEIR_RETRY_BASE_DELAY_MS", "WEIR_RETRY_BACKOFF_FACTOR", "WEIR_RETRY_MAX_DELAY_SECONDS", "WEIR_RETRY_TTL_MINUTES"} {
		t.Setenv(name, "") // empty is unset: the default applies
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"config"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{
		"WEIR_RETRY_MAX_ATTEMPTS        8\n",
		"WEIR_RETRY_BASE_DELAY_MS       250ms\n",
		"WEIR_RETRY_BACKOFF_FACTOR      2\n",
		"WEIR_RETRY_MAX_DELAY_SECONDS   1m0s\n",
		"WEIR_RETRY_TTL_MINUTES         30m0s\n",
		"jitter                         full\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestConfigRefusesBadValue(t *testing.T) {
	t.Setenv("WEIR_RETRY_TTL_MINUTES", "soon")
	var out, errOut bytes.Buffer
	code := Main([]string{"config"}, &out, &errOut)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if want := `weir config: WEIR_RETRY_TTL_MINUTES="soon": not a whole number of minutes`; !strings.Contains(errOut.String(), want) {
		t.Fatalf("stderr %q lacks %q", errOut.String(), want)
	}
	if out.Len() != 0 {
		t.Fatalf("printed a config despite the bad value: %q", out.String())
	}
}

func TestChaosRefusesBadInput(t *testing.T) {
	if code, _, stderr := run("chaos", "extra"); code != 2 || !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Fatalf("chaos extra: %d, %q", code, stderr)
	}
	t.Setenv("WEIR_CHAOS_KILLS", "many")
	if code, _, stderr := run("chaos", "-docs", "1"); code != 2 || !strings.Contains(stderr, `WEIR_CHAOS_KILLS="many" (-kills)`) {
		t.Fatalf("chaos with a bad WEIR_CHAOS_KILLS: %d, %q", code, stderr)
	}
	if code, _, stderr := run("chaos-worker"); code != 2 || !strings.Contains(stderr, "want the run's directory") {
		t.Fatalf("chaos-worker without a directory: %d, %q", code, stderr)
	}
	t.Setenv("WEIR_CHAOS_KILLS", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-cuts", "3"}, "-cuts and -restarts need -postgres"},
		{[]string{"-postgres", "postgres://h/db", "-restarts", "1"}, "-restarts needs -restart-command"},
		{[]string{"-postgres", "postgres://h/db", "-cuts", "-1"}, "must not be negative"},
		{[]string{"-postgres", "not a url", "-cuts", "1"}, "-postgres: not a URL with a host"},
	} {
		if code, _, stderr := run(append([]string{"chaos"}, c.args...)...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Fatalf("chaos %v: %d, %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

func TestFlagsFromEnv(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	storeURL := fs.String("store", "", "")
	llm := fs.String("llm-url", "", "")
	n := fs.Int("batch", 100, "")
	if err := fs.Parse([]string{"-store", "postgres://given"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"WEIR_STORE": "postgres://env", "WEIR_LLM_URL": "http://llm", "WEIR_BATCH": "7"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	set, err := flagsFromEnv(fs, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if !set["llm-url"] || !set["batch"] || set["store"] {
		t.Fatalf("flags set from the environment: %v, want llm-url and batch", set)
	}
	if *storeURL != "postgres://given" || *llm != "http://llm" || *n != 7 {
		t.Fatalf("store %q, llm-url %q, batch %d: want the command line's store and the rest from the environment", *storeURL, *llm, *n)
	}
	env["WEIR_BATCH"] = "seven"
	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.Int("batch", 100, "")
	if _, err := flagsFromEnv(fs2, lookup); err == nil || !strings.Contains(err.Error(), `WEIR_BATCH="seven"`) {
		t.Fatalf("a bad value: %v, want an error naming WEIR_BATCH", err)
	}
}

// The command arms the crash point its environment names (the libraries
// read no environment), and refuses a malformed one before it runs.
func TestCommandArmsTheCrashPoint(t *testing.T) {
	t.Setenv(crashpoint.Env, "x:two")
	if code, _, stderr := run("version"); code != 2 || !strings.Contains(stderr, crashpoint.Env) {
		t.Fatalf("weir version with %s=x:two: %d, %q; want exit 2 naming the variable", crashpoint.Env, code, stderr)
	}
	t.Setenv(crashpoint.Env, "")
	if code, _, stderr := run("version"); code != 0 {
		t.Fatalf("weir version: %d, %q", code, stderr)
	}
}
