package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

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
