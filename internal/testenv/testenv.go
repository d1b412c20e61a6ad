package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"
)

// RequireEnv is the variable that turns a missing service from a skip into
// a failure when set to 1 (or any value [strconv.ParseBool] reads as true).
const RequireEnv = "WEIR_REQUIRE_SERVICES"

// dialTimeout bounds the reachability check. The services are expected on
// loopback, where a refused connection is immediate; the bound only
// matters for an override pointing at a host that drops packets.
const dialTimeout = 2 * time.Second

// service describes one service the tests may need.
type service struct {
	name        string // for messages, e.g. "PostgreSQL"
	env         string // the override variable
	defaultURL  string
	defaultPort string // used when the URL names no port
}

// The services the tests use, with their defaults.
var (
	postgresService = service{name: "PostgreSQL", env: "WEIR_TEST_POSTGRES_URL", defaultURL: "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", defaultPort: "5432"}
	rabbitMQService = service{name: "RabbitMQ", env: "WEIR_TEST_RABBITMQ_URL", defaultURL: "amqp://guest:guest@127.0.0.1:5672/", defaultPort: "5672"}
	natsService     = service{name: "NATS", env: "WEIR_TEST_NATS_URL", defaultURL: "nats://127.0.0.1:4222", defaultPort: "4222"}
)

// Postgres returns the URL of the test PostgreSQL server, or skips the
// test (fails it under WEIR_REQUIRE_SERVICES=1) when the server does not
// answer. The default is postgres://postgres@127.0.0.1:5432/test?sslmode=disable;
// WEIR_TEST_POSTGRES_URL overrides it.
func Postgres(t testing.TB) string {
	t.Helper()
	return postgresService.need(t, os.Getenv)
}

// RabbitMQ returns the AMQP URL of the test RabbitMQ broker, or skips the
// test (fails it under WEIR_REQUIRE_SERVICES=1) when the broker does not
// answer. The default is amqp://guest:guest@127.0.0.1:5672/;
// WEIR_TEST_RABBITMQ_URL overrides it.
func RabbitMQ(t testing.TB) string {
	t.Helper()
	return rabbitMQService.need(t, os.Getenv)
}

// NATS returns the URL of the test NATS server, which must have JetStream
// enabled, or skips the test (fails it under WEIR_REQUIRE_SERVICES=1) when
// the server does not answer. The default is nats://127.0.0.1:4222;
// WEIR_TEST_NATS_URL overrides it.
func NATS(t testing.TB) string {
	t.Helper()
	return natsService.need(t, os.Getenv)
}

// Azurite returns the URL of the test Azure Blob Storage API server, its
// blob endpoint with the account (http://127.0.0.1:10000/devstoreaccount1,
// Azurite's well-known account; WEIR_TEST_AZURITE_URL overrides it), or
// skips the test (fails it under WEIR_REQUIRE_SERVICES=1) when it does
// not answer. It sets AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY, which
// gocloud.dev's azblob:// URLs take their credentials from, to the
// well-known account's, unless they are set.
func Azurite(t testing.TB) string {
	t.Helper()
	u := service{
		name:        "Azurite (the Azure Blob Storage API)",
		env:         "WEIR_TEST_AZURITE_URL",
		defaultURL:  "http://127.0.0.1:10000/" + AzuriteAccount,
		defaultPort: "10000",
	}.need(t, os.Getenv)
	for k, v := range map[string]string{"AZURE_STORAGE_ACCOUNT": AzuriteAccount, "AZURE_STORAGE_KEY": AzuriteKey} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	return u
}

// S3 returns the URL of the test S3 API server (s3rver, whose access key
// and secret are both S3RVER: http://127.0.0.1:4568;
// WEIR_TEST_S3_URL overrides it), or skips the test (fails it under
// WEIR_REQUIRE_SERVICES=1) when it does not answer. It sets
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, which gocloud.dev's s3://
// URLs take their credentials from, to S3RVER, unless they are set.
func S3(t testing.TB) string {
	t.Helper()
	u := service{
		name:        "s3rver (the S3 API)",
		env:         "WEIR_TEST_S3_URL",
		defaultURL:  "http://127.0.0.1:4568",
		defaultPort: "4568",
	}.need(t, os.Getenv)
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if os.Getenv(k) == "" {
			os.Setenv(k, S3Key)
		}
	}
	return u
}

// S3Key is s3rver's access key and secret.
const S3Key = "S3RVER"

// AzuriteAccount and AzuriteKey are Azurite's well-known account and its
// key (public, in Azurite's documentation).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// need returns the service's URL if it answers, and otherwise skips or
// fails t. getenv reads the environment; tests pass a fake.
func (s service) need(t testing.TB, getenv func(string) string) string {
	t.Helper()
	require, err := required(getenv(RequireEnv))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	rawURL := s.defaultURL
	if v := getenv(s.env); v != "" {
		rawURL = v
	}
	addr, err := s.address(rawURL)
	if err != nil {
		// The value may hold a password: name the variable, not its value.
		t.Fatalf("testenv: %s is not a usable URL (%s)", s.env, redact(err))
	}
	if err := dial(addr); err != nil {
		fail, msg := verdict(s, addr, err, require)
		if fail {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return rawURL
}

// required reads the value of WEIR_REQUIRE_SERVICES.
func required(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q is not a boolean; set it to 1 or leave it unset", RequireEnv, v)
	}
	return b, nil
}

// address returns the host:port to dial for rawURL.
func (s service) address(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	host := u.Hostname()
	if host == "" {
		return "", fmt.Errorf("not a URL with a host to dial")
	}
	port := u.Port()
	if port == "" {
		port = s.defaultPort
	}
	return net.JoinHostPort(host, port), nil
}

func dial(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return err
	}
	return conn.Close()
}

// verdict decides what a failed dial means: a loud skip, or a failure when
// services are required. It returns the message for either.
func verdict(s service, addr string, dialErr error, require bool) (fail bool, msg string) {
	if require {
		return true, fmt.Sprintf("%s not reachable at %s (%v), and %s=1 requires it; start it, or point %s at one",
			s.name, addr, dialErr, RequireEnv, s.env)
	}
	return false, fmt.Sprintf("SKIPPING: %s not reachable at %s (%v); start it or set %s; set %s=1 to make this a failure",
		s.name, addr, dialErr, s.env, RequireEnv)
}

// redact returns err's message without the URL that url.Parse puts in it.
func redact(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// Missing skips the test, loudly, for want of what the message names (a
// program, say), or fails it under WEIR_REQUIRE_SERVICES=1.
func Missing(t testing.TB, what string) {
	t.Helper()
	require, err := required(os.Getenv(RequireEnv))
	if err != nil {
		t.Fatal(err)
	}
	if require {
		t.Fatalf("%s, and %s=1 requires it", what, RequireEnv)
	}
	t.Skipf("SKIPPING: %s; set %s=1 to make this a failure", what, RequireEnv)
}

// Int returns the whole number the variable name holds, or def when it is
// unset, and fails the test when it holds anything but a whole number of
// at least least: a test's size or seed, set from outside.
func Int(t testing.TB, name string, def, least int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		t.Fatalf("%s=%q: want a whole number, %d or more", name, v, least)
	}
	return n
}
