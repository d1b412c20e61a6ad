package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/syncio"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/transport"
)

const (
	bearerKey = "sk-live-5be1a7c09d"
	azureKey  = "azk-7f3e0c2b91"
	urlPass   = "pw-9d2c7e"
)

// echoServer answers every request with status code and a body that
// quotes the request's headers, as some upstreams do in their error
// pages. With inStatus, the status line's reason phrase and the
// Retry-After header quote the Authorization header too.
func echoServer(t *testing.T, code int, inStatus bool) *server {
	return newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		body, _ := json.Marshal(map[string]any{"error": "upstream failed", "headers": r.Header})
		if !inStatus {
			w.WriteHeader(code)
			w.Write(body)
			return
		}
		conn, bufrw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(bufrw, "HTTP/1.1 %d Echo %s\r\nRetry-After: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			code, r.Header.Get("Authorization"), r.Header.Get("Api-Key"), len(body), body)
		bufrw.Flush()
	})
}

// credentialed returns a request to srv with a password in its URL and an
// API key in its headers.
func credentialed(t *testing.T, method, srvURL string) *http.Request {
	t.Helper()
	u, err := url.Parse(srvURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("weir", urlPass)
	u.Path = "/v1/chat/completions"
	req := newRequest(t, method, u.String(), strings.NewReader(`{"model":"m"}`))
	req.Header.Set("Authorization", "Bearer "+bearerKey)
	req.Header.Set("Api-Key", azureKey)
	return req
}

func holdsNoSecret(t *testing.T, where, text string) {
	t.Helper()
	for _, secret := range []string{bearerKey, azureKey, urlPass} {
		if strings.Contains(text, secret) {
			t.Errorf("%s holds %q:\n%s", where, secret, text)
		}
	}
}

// An upstream that echoes the request's credentials, in its body, in its
// status line or in a header, gets none of them into the transport's
// errors, its give-up or its logs; the response itself reaches the caller
// unchanged.
func TestEchoedCredentialsStayOutOfErrorsAndLogs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		code     int
		inStatus bool
		method   string
	}{
		{"400 body", 400, false, http.MethodPost},
		{"500 body", 500, false, http.MethodGet},
		{"429 body", 429, false, http.MethodPost},
		{"503 status line and Retry-After", 503, true, http.MethodGet},
		{"500 status line, POST", 500, true, http.MethodPost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncio.Buffer
			srv := echoServer(t, tc.code, tc.inStatus)
			tr := newTransport(t, transport.Config{
				Base:   srv.Client().Transport,
				Retry:  quick(3),
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			})
			resp, err := (&http.Client{Transport: tr}).Do(credentialed(t, tc.method, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			if body := readBody(t, resp); resp.StatusCode != tc.code || !strings.Contains(body, bearerKey) {
				t.Fatalf("got %v %q, want the upstream's response as it sent it", resp.Status, body)
			}
			holdsNoSecret(t, "the logs", logs.String())
			if tc.inStatus && tc.method == http.MethodGet && !strings.Contains(logs.String(), "ignoring retry-after") {
				t.Errorf("the bad Retry-After is not logged:\n%s", logs.String())
			}
			if tc.code != 400 && !strings.Contains(logs.String(), "retry gave up") {
				t.Errorf("no give-up in the logs:\n%s", logs.String())
			}
			if gu := transport.GiveUp(resp); gu != nil {
				holdsNoSecret(t, "the give-up", gu.Error())
				holdsNoSecret(t, "the give-up's detail", gu.Detail)
			} else if tc.code != 400 {
				t.Errorf("no give-up for a %d", tc.code)
			}
		})
	}

	t.Run("cancelled while waiting to retry", func(t *testing.T) {
		var logs syncio.Buffer
		clk := clock.NewFake(t0)
		srv := echoServer(t, 503, true)
		tr := newTransport(t, transport.Config{
			Base: srv.Client().Transport, Retry: retry.Config{Clock: clk},
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		err := cancelWhileWaiting(t, clk, tr, credentialed(t, http.MethodGet, srv.URL))
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "503") {
			t.Fatalf("got %v, want the cancellation naming the 503", err)
		}
		holdsNoSecret(t, "the error", err.Error())
		holdsNoSecret(t, "the logs", logs.String())
	})

	t.Run("a base transport's error quoting the request", func(t *testing.T) {
		var logs syncio.Buffer
		base := &fakeBase{script: []func(*http.Request) (*http.Response, error){
			func(req *http.Request) (*http.Response, error) {
				return nil, &url.Error{Op: "proxy " + req.Header.Get("Api-Key"), URL: req.URL.String(),
					Err: errors.New("refused " + req.Header.Get("Authorization"))}
			},
		}}
		tr := newTransport(t, transport.Config{
			Base: base, Retry: quick(3),
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		_, err := tr.RoundTrip(credentialed(t, http.MethodGet, "http://api.test"))
		if err == nil {
			t.Fatal("no error")
		}
		if _, ok := errors.AsType[*url.Error](err); !ok {
			t.Fatalf("%v lost the base transport's error", err)
		}
		holdsNoSecret(t, "the error", err.Error())
		holdsNoSecret(t, "the logs", logs.String())
		if !strings.Contains(err.Error(), "api.test") {
			t.Fatalf("the error %q lost the host", err)
		}
	})
}
