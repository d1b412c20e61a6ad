package extract_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
)

var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

// chatAnswer is a chat-completions response whose content is content.
func chatAnswer(content string) string {
	b, _ := json.Marshal(map[string]any{
		"id":      "chatcmpl-1",
		"object":  "chat.completion",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}}},
	})
	return string(b)
}

const goodContent = `{"title":"Reservoir gates leaking","language":"en","key_terms":["Reservoir","gates","water board","gates"],"summary":"Two reservoir gates leak; the board will replace them."}`

// server is an httptest server answering with handle, counting requests.
type server struct {
	*httptest.Server
	hits atomic.Int32
}

func newServer(t *testing.T, handle func(n int32, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle(s.hits.Add(1), w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func newLLM(t *testing.T, cfg extract.LLMConfig) *extract.LLM {
	t.Helper()
	l, err := extract.NewLLM(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLLMSuccess(t *testing.T) {
	t.Parallel()
	var got struct {
		Model          string `json:"model"`
		ResponseFormat struct {
			Type string `json:"type"`
		} `json:"response_format"`
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	srv := newServer(t, func(_ int32, w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request line "+r.Method+" "+r.URL.Path, http.StatusTeapot)
			return
		}
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "unexpected Authorization header", http.StatusTeapot)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), http.StatusTeapot)
			return
		}
		io.WriteString(w, chatAnswer(goodContent))
	})
	l := newLLM(t, extract.LLMConfig{URL: srv.URL + "/v1/"})
	r, err := l.Extract(context.Background(), extract.Input{ID: "doc-1", Text: english})
	if err != nil {
		t.Fatal(err)
	}
	want := extract.Result{
		Title:     "Reservoir gates leaking",
		Language:  "en",
		WordCount: extractLocal(t, extract.Input{Text: english}).WordCount,
		KeyTerms:  []string{"reservoir", "gates", "water board"},
		Summary:   "Two reservoir gates leak; the board will replace them.",
		Extractor: "llm:gpt-4o-mini",
	}
	if !sameResult(r, want) {
		t.Errorf("Result = %+v\nwant %+v", r, want)
	}
	if got.Model != "gpt-4o-mini" || got.ResponseFormat.Type != "json_object" || len(got.Messages) != 2 ||
		got.Messages[0].Role != "system" || got.Messages[1].Role != "user" || got.Messages[1].Content != english {
		t.Errorf("request = %+v", got)
	}
	if srv.hits.Load() != 1 {
		t.Errorf("%d requests, want 1", srv.hits.Load())
	}
}

func sameResult(a, b extract.Result) bool {
	return a.Title == b.Title && a.Language == b.Language && a.WordCount == b.WordCount &&
		slices.Equal(a.KeyTerms, b.KeyTerms) && a.Summary == b.Summary && a.Extractor == b.Extractor
}

// The model's answer is checked and completed locally.
func TestLLMAnswerMergedWithLocal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      extract.Input
		content string
		check   func(t *testing.T, r, loc extract.Result)
	}{
		{
			name:    "input title wins over the model's",
			in:      extract.Input{Title: "Given", Text: english},
			content: goodContent,
			check: func(t *testing.T, r, _ extract.Result) {
				if r.Title != "Given" {
					t.Errorf("Title = %q", r.Title)
				}
			},
		},
		{
			name:    "empty fields and a bad language come from local",
			in:      extract.Input{Text: french},
			content: `{"title":"","language":"French","key_terms":[],"summary":"  "}`,
			check: func(t *testing.T, r, loc extract.Result) {
				if r.Title != loc.Title || r.Language != "fr" || !slices.Equal(r.KeyTerms, loc.KeyTerms) || r.Summary != loc.Summary {
					t.Errorf("Result = %+v, want local's fields %+v", r, loc)
				}
			},
		},
		{
			name:    "und and upper-case codes accepted, terms capped at 10",
			in:      extract.Input{Text: english},
			content: `{"title":"T","language":" UND ","key_terms":["a","b","c","d","e","f","g","h","i","j","k","l"],"summary":"S"}`,
			check: func(t *testing.T, r, _ extract.Result) {
				if r.Language != "und" || len(r.KeyTerms) != 10 {
					t.Errorf("Language %q KeyTerms %q", r.Language, r.KeyTerms)
				}
			},
		},
		{
			name:    "fenced object and missing keys",
			in:      extract.Input{Text: english},
			content: "```json\n{\"summary\":\"Fenced.\"}\n```",
			check: func(t *testing.T, r, loc extract.Result) {
				if r.Summary != "Fenced." || r.Title != loc.Title || r.Language != "en" {
					t.Errorf("Result = %+v", r)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, chatAnswer(tt.content)) })
			r, err := newLLM(t, extract.LLMConfig{URL: srv.URL, Model: "local-model"}).Extract(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if r.Extractor != "llm:local-model" {
				t.Errorf("Extractor = %q", r.Extractor)
			}
			tt.check(t, r, extractLocal(t, tt.in))
		})
	}
}

func TestLLMSendsAPIKeyAndNeverLogsIt(t *testing.T) {
	t.Parallel()
	const key = "sk-test-0123456789"
	srv := newServer(t, func(n int32, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "missing key", http.StatusUnauthorized)
			return
		}
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, chatAnswer(goodContent))
	})
	var logs bytes.Buffer
	l := newLLM(t, extract.LLMConfig{
		URL:    srv.URL,
		APIKey: key,
		Retry:  retry.Config{Backoff: backoff.Constant(0)},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if _, err := l.Extract(context.Background(), extract.Input{Text: english}); err != nil {
		t.Fatal(err)
	}
	if srv.hits.Load() != 2 {
		t.Errorf("%d requests, want 2 (one retry)", srv.hits.Load())
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("the retry was not logged: %q", logs.String())
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the API key was logged: %q", logs.String())
	}
	// A key the server refuses: a permanent error that does not carry it.
	bad := newLLM(t, extract.LLMConfig{URL: srv.URL, APIKey: "sk-wrong-key"})
	_, err := bad.Extract(context.Background(), extract.Input{Text: english})
	if se, ok := errors.AsType[*extract.StatusError](err); !ok || se.StatusCode != http.StatusUnauthorized || !retry.IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent 401 StatusError", err)
	}
	if strings.Contains(err.Error(), "sk-wrong-key") {
		t.Errorf("the API key is in the error: %v", err)
	}
}

// result is the outcome of an Extract run in a goroutine.
type result struct {
	r   extract.Result
	err error
}

func extractAsync(l *extract.LLM, in extract.Input) <-chan result {
	c := make(chan result, 1)
	go func() {
		r, err := l.Extract(context.Background(), in)
		c <- result{r, err}
	}()
	return c
}

func TestLLMHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(n int32, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "7")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, chatAnswer(goodContent))
	})
	clk := clock.NewFake(t0)
	var delays []time.Duration
	l := newLLM(t, extract.LLMConfig{
		URL:   srv.URL,
		Clock: clk,
		Retry: retry.Config{
			Rand:    func() float64 { return 0.5 }, // no jitter: the backoff alone would wait 1 s
			OnRetry: func(ev retry.Event) { delays = append(delays, ev.Delay) },
		},
	})
	done := extractAsync(l, extract.Input{Text: english})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal("no retry wait started:", err)
	}
	clk.Advance(7*time.Second - time.Millisecond)
	if clk.Timers() != 1 || srv.hits.Load() != 1 {
		t.Fatalf("retried before the Retry-After: %d timers, %d requests", clk.Timers(), srv.hits.Load())
	}
	clk.Advance(time.Millisecond)
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatal(res.err)
		}
	case <-ctx.Done():
		t.Fatal("Extract did not return after the Retry-After")
	}
	if srv.hits.Load() != 2 || !slices.Equal(delays, []time.Duration{7 * time.Second}) {
		t.Errorf("%d requests, waits %v; want 2 and [7s]", srv.hits.Load(), delays)
	}
}

// drive advances clk to each retry wait until done has a result.
func drive(t *testing.T, clk *clock.Fake, done <-chan result) result {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		// Taken before the timers are counted, so that a timer made in
		// between is not missed.
		changed := clk.Changed()
		if clk.Timers() > 0 {
			clk.AdvanceToNextTimer()
			continue
		}
		select {
		case res := <-done:
			return res
		case <-changed:
		case <-timeout:
			t.Fatal("Extract did not return")
			return result{}
		}
	}
}

func TestLLMBreakerOpensAndFailsFast(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	srv := newServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			io.WriteString(w, chatAnswer(goodContent))
			return
		}
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	})
	clk := clock.NewFake(t0)
	l := newLLM(t, extract.LLMConfig{URL: srv.URL, Clock: clk}) // the spec's retry and breaker
	in := extract.Input{Text: english}

	// The 5th failed attempt within 30 s opens the breaker; the call stops
	// there instead of waiting for a 6th attempt the breaker would refuse.
	res := drive(t, clk, extractAsync(l, in))
	if n := srv.hits.Load(); n != 5 {
		t.Fatalf("%d requests, want 5", n)
	}
	checkUnavailable(t, res.err, 60*time.Second)
	if se, ok := errors.AsType[*extract.StatusError](res.err); !ok || se.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("err = %v, want it to wrap the 503", res.err)
	}
	if l.BreakerState() != breaker.Open {
		t.Fatalf("breaker %v, want open", l.BreakerState())
	}

	// Later calls fail fast, without a request and without a wait.
	clk.Advance(20 * time.Second)
	start := time.Now()
	_, err := l.Extract(context.Background(), in)
	if took := time.Since(start); took > time.Second {
		t.Errorf("refused call took %v", took)
	}
	checkUnavailable(t, err, 40*time.Second)
	if n := srv.hits.Load(); n != 5 {
		t.Fatalf("%d requests after the breaker opened, want still 5", n)
	}

	// After the open delay, one probe goes through and closes it.
	healthy.Store(true)
	clk.Advance(40 * time.Second)
	if l.BreakerState() != breaker.HalfOpen {
		t.Fatalf("breaker %v, want half-open", l.BreakerState())
	}
	if _, err := l.Extract(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if l.BreakerState() != breaker.Closed || srv.hits.Load() != 6 {
		t.Fatalf("breaker %v after %d requests, want closed after 6", l.BreakerState(), srv.hits.Load())
	}
}

func checkUnavailable(t *testing.T, err error, retryIn time.Duration) {
	t.Helper()
	open, ok := errors.AsType[*breaker.OpenError](err)
	if !ok {
		t.Fatalf("err = %v, want a *breaker.OpenError in it", err)
	}
	if open.RetryIn != retryIn || open.Name != extract.DefaultBreakerName {
		t.Errorf("OpenError %+v, want RetryIn %v", open, retryIn)
	}
	if !errors.Is(err, breaker.ErrOpen) {
		t.Error("err does not match breaker.ErrOpen")
	}
	if _, ok := errors.AsType[*extract.UnavailableError](err); !ok {
		t.Errorf("err %T is not an *UnavailableError", err)
	}
	// The job engine must retry it later, not dead-letter it.
	if retry.IsPermanent(err) {
		t.Error("an open breaker's error is permanent")
	}
	if d, ok := retry.AfterHint(err); !ok || d != retryIn {
		t.Errorf("retry-after hint %v %v, want %v", d, ok, retryIn)
	}
}

func TestLLMStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status     int
		retryAfter string
		permanent  bool
		hint       time.Duration
	}{
		{http.StatusBadRequest, "", true, 0},
		{http.StatusUnauthorized, "", true, 0},
		{http.StatusNotFound, "", true, 0},
		{http.StatusUnprocessableEntity, "", true, 0},
		{http.StatusRequestTimeout, "", false, 0},
		{http.StatusTooManyRequests, "30", false, 30 * time.Second},
		{http.StatusInternalServerError, "", false, 0},
		{http.StatusNotImplemented, "", false, 0},
		{http.StatusFound, "", false, 0},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				if tt.status == http.StatusFound {
					w.Header().Set("Location", "/elsewhere")
				}
				http.Error(w, `{"error":{"message":"no"}}`, tt.status)
			})
			// One attempt: what the job engine sees when the transport's
			// retries are spent.
			l := newLLM(t, extract.LLMConfig{URL: srv.URL, Retry: retry.Config{MaxAttempts: 1}})
			_, err := l.Extract(context.Background(), extract.Input{Text: english})
			se, ok := errors.AsType[*extract.StatusError](err)
			if !ok || se.StatusCode != tt.status {
				t.Fatalf("err = %v, want a StatusError %d", err, tt.status)
			}
			if !strings.Contains(err.Error(), `"message":"no"`) {
				t.Errorf("err %q does not show the body", err)
			}
			if got := retry.IsPermanent(err); got != tt.permanent {
				t.Errorf("permanent = %v, want %v", got, tt.permanent)
			}
			if d, ok := retry.AfterHint(err); ok != (tt.hint > 0) || d != tt.hint {
				t.Errorf("hint = %v %v, want %v", d, ok, tt.hint)
			}
			if srv.hits.Load() != 1 {
				t.Errorf("%d requests, want 1", srv.hits.Load())
			}
		})
	}
}

func TestLLMPermanent4xxIsNotRetried(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "context length exceeded", http.StatusBadRequest)
	})
	l := newLLM(t, extract.LLMConfig{URL: srv.URL}) // 6 attempts allowed
	_, err := l.Extract(context.Background(), extract.Input{Text: english})
	if !retry.IsPermanent(err) || srv.hits.Load() != 1 {
		t.Fatalf("err = %v after %d requests, want permanent after 1", err, srv.hits.Load())
	}
	if l.BreakerState() != breaker.Closed {
		t.Errorf("a 400 moved the breaker to %v", l.BreakerState())
	}
}

func TestLLMMalformedAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, problem string
	}{
		{"not json", "<html>gateway</html>", "not chat-completions JSON"},
		{"no choices", `{"choices":[]}`, "no choices"},
		{"no content", `{"choices":[{"message":{"role":"assistant"}}]}`, "no message content"},
		{"content not an object", chatAnswer("Sure! Here is the summary."), "content is not a JSON object"},
		{"truncated object", chatAnswer(`{"title":"x","summ`), "not the JSON object asked for"},
		{"wrong type", chatAnswer(`{"key_terms":"a, b"}`), "not the JSON object asked for"},
		{"trailing text", chatAnswer(`{"title":"x"} and more`), "text after the JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, tt.body) })
			_, err := newLLM(t, extract.LLMConfig{URL: srv.URL}).Extract(context.Background(), extract.Input{Text: english})
			if !errors.Is(err, extract.ErrBadAnswer) {
				t.Fatalf("err = %v, want ErrBadAnswer", err)
			}
			if !strings.Contains(err.Error(), tt.problem) {
				t.Errorf("err %q does not say %q", err, tt.problem)
			}
			if retry.IsPermanent(err) {
				t.Errorf("err %v is permanent, want retryable", err)
			}
		})
	}
}

func TestLLMRefusesPoisonWithoutACall(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, chatAnswer(goodContent)) })
	l := newLLM(t, extract.LLMConfig{URL: srv.URL})
	for _, text := range []string{"", "a\x00b", "\xff\xfe", "?!…"} {
		_, err := l.Extract(context.Background(), extract.Input{Text: text})
		if !errors.Is(err, extract.ErrNotText) || !retry.IsPermanent(err) {
			t.Errorf("Extract(%q) = %v, want a permanent ErrNotText", text, err)
		}
	}
	if srv.hits.Load() != 0 {
		t.Errorf("%d requests for poison input", srv.hits.Load())
	}
}

func TestLLMCancel(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := newServer(t, func(_ int32, w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server sees the client go
		close(arrived)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	l := newLLM(t, extract.LLMConfig{URL: srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	_, err := l.Extract(ctx, extract.Input{Text: english})
	if !errors.Is(err, context.Canceled) || retry.IsPermanent(err) {
		t.Fatalf("err = %v, want context.Canceled, not permanent", err)
	}
	if l.BreakerState() != breaker.Closed {
		t.Errorf("a cancelled call moved the breaker to %v", l.BreakerState())
	}
}

func TestLLMSendsTitleAndCutsLongText(t *testing.T) {
	t.Parallel()
	var content string
	srv := newServer(t, func(_ int32, w http.ResponseWriter, r *http.Request) {
		var req struct{ Messages []struct{ Content string } }
		json.NewDecoder(r.Body).Decode(&req)
		content = req.Messages[1].Content
		io.WriteString(w, chatAnswer(goodContent))
	})
	l := newLLM(t, extract.LLMConfig{URL: srv.URL, MaxInputRunes: 12})
	if _, err := l.Extract(context.Background(), extract.Input{Title: "Notes", Text: "Grüße aus München und Köln"}); err != nil {
		t.Fatal(err)
	}
	if want := "Title: Notes\n\nGrüße aus Mü"; content != want {
		t.Errorf("user message %q, want %q", content, want)
	}
}

func TestNewLLMConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []extract.LLMConfig{
		{},
		{URL: "127.0.0.1:8080/v1"},
		{URL: "ftp://example.com"},
		{URL: "http://"},
		{URL: "http://x", Timeout: -time.Second},
		{URL: "http://x", MaxInputRunes: -1},
		{URL: "http://x", Retry: retry.Config{MaxAttempts: -1}},
	} {
		if _, err := extract.NewLLM(cfg); !errors.Is(err, extract.ErrInvalidConfig) {
			t.Errorf("NewLLM(%+v) error = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	_, err := extract.NewLLM(extract.LLMConfig{URL: "ftp://user:secret@example.com"})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("error %v shows the URL's password", err)
	}
	l, err := extract.NewLLM(extract.LLMConfig{URL: "https://api.example.com/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Model() != extract.DefaultModel || l.Breaker().Name() != extract.DefaultBreakerName || l.BreakerState() != breaker.Closed {
		t.Errorf("defaults: model %q breaker %q %v", l.Model(), l.Breaker().Name(), l.BreakerState())
	}
	shared, _ := breaker.New(breaker.Config{Name: "shared"})
	l2, err := extract.NewLLM(extract.LLMConfig{URL: "http://x", Breaker: shared})
	if err != nil || l2.Breaker() != shared {
		t.Errorf("a given breaker is not used: %v", err)
	}
}
