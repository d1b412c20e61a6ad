package transport_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/transport"
)

// BenchmarkRoundTrip measures what the transport adds to a call that
// succeeds at once, over a base that answers without I/O.
func BenchmarkRoundTrip(b *testing.B) {
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
	br, err := breaker.New(breaker.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		cfg  transport.Config
	}{
		{"retry", transport.Config{Base: base}},
		{"retry+breaker", transport.Config{Base: base, Breaker: br}},
		{"retry+breaker+timeout", transport.Config{Base: base, Breaker: br, AttemptTimeout: time.Minute}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr, err := transport.New(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			b.ReportAllocs()
			for b.Loop() {
				r, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				r.Body.Close()
			}
		})
	}
}
