package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strings"
	"testing"
)

// The three tests below use the real services. Under
// WEIR_REQUIRE_SERVICES=1 (as in .ci/run) they prove that the services
// are up; elsewhere they skip loudly when one is not.

func TestPostgres(t *testing.T) {
	t.Parallel()
	checkURL(t, Postgres(t), "postgres")
}

func TestRabbitMQ(t *testing.T) {
	t.Parallel()
	checkURL(t, RabbitMQ(t), "amqp", "amqps")
}

func TestNATS(t *testing.T) {
	t.Parallel()
	checkURL(t, NATS(t), "nats", "tls")
}

func checkURL(t *testing.T, raw string, schemes ...string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("returned URL %q: %v", raw, err)
	}
	for _, s := range schemes {
		if u.Scheme == s {
			return
		}
	}
	t.Errorf("returned URL %q: scheme %q, want one of %q", raw, u.Scheme, schemes)
}

// fakeTB records a skip or a failure. Like the real ones, Skip and Fatal
// end the goroutine, so the helper under test must be run through outcome.
type fakeTB struct {
	testing.TB // nil; calling a method not overridden here panics
	skipped    bool
	failed     bool
	msg        string
}

func (*fakeTB) Helper() {}

func (f *fakeTB) Skip(args ...any) {
	f.skipped, f.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any) {
	f.failed, f.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// outcome runs s.need with the given environment on a fake testing.TB and
// reports what happened.
func outcome(s service, env map[string]string) (got string, tb *fakeTB) {
	tb = &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = s.need(tb, func(k string) string { return env[k] })
	}()
	<-done
	return got, tb
}

// reached runs s.need with env and fails t unless it neither skipped nor
// failed and returned want.
func reached(t *testing.T, s service, env map[string]string, want string) {
	t.Helper()
	got, tb := outcome(s, env)
	if tb.skipped || tb.failed {
		t.Fatalf("skipped=%v failed=%v (%s), want neither", tb.skipped, tb.failed, tb.msg)
	}
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// closed is a service whose default address, 127.0.0.1:1, refuses
// connections on any machine the tests run on.
var closed = service{
	name:        "Closed",
	env:         "WEIR_TEST_CLOSED_URL",
	defaultURL:  "closed://user:secret@127.0.0.1:1/db",
	defaultPort: "1",
}

// listen opens a TCP listener on loopback, standing in for a service that
// is up, and returns its port.
func listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// An unreachable service skips the test loudly, saying how to require
// the services, unless they are required: then it fails the test. Neither
// message shows the URL's password.
func TestUnreachableSkipsLoudlyOrFailsWhenRequired(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "0", "false", "1", "true"} {
		required := v == "1" || v == "true"
		_, tb := outcome(closed, map[string]string{RequireEnv: v})
		if tb.failed != required || tb.skipped == required {
			t.Fatalf("%s=%q: skipped=%v failed=%v, want failed=%v", RequireEnv, v, tb.skipped, tb.failed, required)
		}
		wants := []string{"Closed not reachable at 127.0.0.1:1 ("}
		if !required {
			wants = []string{"SKIPPING: " + wants[0], "WEIR_TEST_CLOSED_URL", RequireEnv + "=1"}
			if !strings.HasPrefix(tb.msg, "SKIPPING:") {
				t.Errorf("message %q does not start with SKIPPING:", tb.msg)
			}
		}
		for _, want := range wants {
			if !strings.Contains(tb.msg, want) {
				t.Errorf("%s=%q: message %q does not contain %q", RequireEnv, v, tb.msg, want)
			}
		}
		if strings.Contains(tb.msg, "secret") {
			t.Errorf("message %q shows the password", tb.msg)
		}
	}
}

func TestBadRequireValueFails(t *testing.T) {
	t.Parallel()
	_, tb := outcome(closed, map[string]string{RequireEnv: "yes please"})
	if !tb.failed {
		t.Fatalf("skipped=%v failed=%v, want a failure", tb.skipped, tb.failed)
	}
	if !strings.Contains(tb.msg, `WEIR_REQUIRE_SERVICES="yes please"`) {
		t.Errorf("message %q does not name the variable and value", tb.msg)
	}
}

func TestReachableReturnsURL(t *testing.T) {
	t.Parallel()
	port := listen(t)
	up := closed
	up.defaultURL = "closed://127.0.0.1:" + port + "/db"
	reached(t, up, map[string]string{RequireEnv: "1"}, up.defaultURL)
}

func TestOverride(t *testing.T) {
	t.Parallel()
	port := listen(t)
	t.Run("reachable", func(t *testing.T) {
		want := "closed://127.0.0.1:" + port + "/other"
		reached(t, closed, map[string]string{closed.env: want}, want)
	})
	t.Run("default port", func(t *testing.T) {
		s := closed
		s.defaultPort = port
		want := "closed://127.0.0.1/other"
		reached(t, s, map[string]string{closed.env: want}, want)
	})
	t.Run("no host", func(t *testing.T) {
		bad := "closed:///db?host=/var/run/closed"
		_, tb := outcome(closed, map[string]string{closed.env: bad})
		if !tb.failed {
			t.Fatalf("skipped=%v failed=%v, want a failure for an override without a host", tb.skipped, tb.failed)
		}
		if !strings.Contains(tb.msg, closed.env) {
			t.Errorf("message %q does not name the variable", tb.msg)
		}
		if strings.Contains(tb.msg, "/var/run/closed") {
			t.Errorf("message %q repeats the value, which may hold a password", tb.msg)
		}
	})
}

func TestAddress(t *testing.T) {
	t.Parallel()
	s := service{defaultPort: "5432"}
	tests := []struct {
		url, want string
		wantErr   bool
	}{
		{url: "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", want: "127.0.0.1:5432"},
		{url: "postgres://db.internal/test", want: "db.internal:5432"},
		{url: "amqp://guest:guest@[::1]:5673/", want: "[::1]:5673"},
		{url: "nats://localhost:4222", want: "localhost:4222"},
		{url: "postgres:///test", wantErr: true},
		{url: "host=127.0.0.1 port=5432", wantErr: true},
		{url: "://", wantErr: true},
	}
	for _, tt := range tests {
		got, err := s.address(tt.url)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("address(%q) = %q, %v; want %q, error %v", tt.url, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestVerdict(t *testing.T) {
	t.Parallel()
	s := service{name: "PostgreSQL", env: "WEIR_TEST_POSTGRES_URL"}
	dialErr := errors.New("connection refused")

	fail, msg := verdict(s, "127.0.0.1:5432", dialErr, false)
	want := "SKIPPING: PostgreSQL not reachable at 127.0.0.1:5432 (connection refused); " +
		"start it or set WEIR_TEST_POSTGRES_URL; set WEIR_REQUIRE_SERVICES=1 to make this a failure"
	if fail || msg != want {
		t.Errorf("not required: got %v, %q; want false, %q", fail, msg, want)
	}

	fail, msg = verdict(s, "127.0.0.1:5432", dialErr, true)
	want = "PostgreSQL not reachable at 127.0.0.1:5432 (connection refused), and " +
		"WEIR_REQUIRE_SERVICES=1 requires it; start it, or point WEIR_TEST_POSTGRES_URL at one"
	if !fail || msg != want {
		t.Errorf("required: got %v, %q; want true, %q", fail, msg, want)
	}
}
