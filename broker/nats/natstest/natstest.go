// Package natstest helps the tests that use a shared NATS server, the
// machine's: each test names its streams with a prefix of its own, and
// they are deleted when it ends, so that the server keeps no run's
// messages and no two tests meet.
package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Prefix returns a stream prefix of t's own, for nats.Config.StreamPrefix:
// "WEIRTEST_", twelve hex digits and "_". When t ends, the streams of the
// server at url whose names begin with it are deleted.
func Prefix(t testing.TB, url string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	prefix := "WEIRTEST_" + strings.ToUpper(hex.EncodeToString(b)) + "_"
	t.Cleanup(func() { DeleteStreams(t, url, prefix) })
	return prefix
}

// DeleteStreams deletes the streams of the server at url whose names
// begin with prefix, reporting a failure with t.Errorf.
func DeleteStreams(t testing.TB, url, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Errorf("delete the test's streams: %v", err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Errorf("delete the test's streams: %v", err)
		return
	}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if strings.HasPrefix(name, prefix) {
			if err := js.DeleteStream(ctx, name); err != nil {
				t.Errorf("delete stream %s: %v", name, err)
			}
		}
	}
	if err := names.Err(); err != nil {
		t.Errorf("list streams: %v", err)
	}
}
