package extract

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/defaults"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/transport"
)

// Defaults of LLMConfig.
const (
	DefaultModel         = "gpt-4o-mini"
	DefaultTimeout       = 60 * time.Second
	DefaultMaxInputRunes = 16000
	DefaultBreakerName   = "extract-llm"
	// MaxAnswerBytes is the largest response body read from the endpoint.
	MaxAnswerBytes = 4 << 20
	// maxErrorBody is how much of an error response a StatusError shows.
	maxErrorBody = 512
)

// ErrInvalidConfig is wrapped by the error NewLLM returns for a bad
// LLMConfig.
var ErrInvalidConfig = errors.New("invalid llm config")

// ErrBadAnswer is matched by the error for a response the LLM extractor
// cannot read: not JSON, without choices, or with a content that is not the
// JSON object asked for. The error is retryable: a model may answer better
// next time.
var ErrBadAnswer = errors.New("unreadable llm answer")

// LLMConfig configures an LLM extractor. Only URL is required; every other
// field's zero value takes the default weir's resilience spec gives.
type LLMConfig struct {
	// URL is the base URL of an OpenAI-compatible API, such as
	// http://127.0.0.1:8080/v1; requests go to {URL}/chat/completions.
	// Required; the scheme must be http or https.
	URL string
	// Model is the model asked for. Default "gpt-4o-mini".
	Model string
	// APIKey, if set, is sent as "Authorization: Bearer <APIKey>". It is
	// never logged nor put in an error: where the endpoint or a proxy
	// echoes it (in an error body, an error message), it is replaced by
	// "[REDACTED]" in every error Extract returns and every log line and
	// retry event the extractor gives. Default "": no Authorization
	// header.
	APIKey string
	// Timeout is how long each HTTP attempt may wait for the response
	// headers (the resilience transport's per-attempt timeout; the waits
	// between retries are not counted). Default 60 s. Must not be negative.
	Timeout time.Duration
	// MaxInputRunes bounds the text sent to the model: longer text is cut
	// to its first MaxInputRunes runes. Default 16000. Must not be
	// negative.
	MaxInputRunes int
	// Transport sends each attempt. Default http.DefaultTransport. It is
	// wrapped by weir's resilience transport, which retries and goes
	// through the breaker.
	Transport http.RoundTripper
	// Retry is the retry policy of each call. Its zero value is the spec's:
	// 6 attempts (5 retries), waits from 1 s doubling to 60 s with ±20%
	// jitter, a Retry-After honoured up to the 60 s cap. 429, 500, 502, 503
	// and 504 are retried, transport errors as the transport package says
	// (requests are retried as if idempotent: a chat completion has no
	// effect but its cost). Its Clock defaults to Clock and its Logger to
	// Logger; its Retryable is ignored.
	Retry retry.Config
	// Breaker admits each attempt. Default: a breaker named "extract-llm"
	// with the breaker package's defaults, which are the spec's (open after
	// 5 failures in 30 s, stay open 60 s, then 1 probe) on Clock. Pass one
	// to share it with other callers of the same endpoint.
	Breaker *breaker.Breaker
	// Clock is the source of time for the retries and the default breaker.
	// Default clock.Real. (The per-attempt timeout runs on the real clock,
	// as the transport package explains.)
	Clock clock.Clock
	// Logger logs retries and the transport's decisions, with fixed keys
	// (attempt, err), credentials removed. Default nil: no logs.
	Logger *slog.Logger
}

// LLM is an Extractor that asks an OpenAI-compatible chat-completions
// endpoint. It is safe for concurrent use.
type LLM struct {
	endpoint string
	model    string
	apiKey   string
	maxRunes int
	client   *http.Client
	breaker  *breaker.Breaker
	clock    clock.Clock
}

var _ Extractor = (*LLM)(nil)

// NewLLM returns an LLM extractor, or an error wrapping ErrInvalidConfig
// that names the bad field.
func NewLLM(cfg LLMConfig) (*LLM, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("extract: URL is required: %w", ErrInvalidConfig)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("extract: URL %q is not an http or https URL: %w", redact.URL(cfg.URL), ErrInvalidConfig)
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if err := cmp.Or(
		defaults.Set("extract: Timeout", &cfg.Timeout, DefaultTimeout),
		defaults.Set("extract: MaxInputRunes", &cfg.MaxInputRunes, DefaultMaxInputRunes),
	); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrInvalidConfig)
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Breaker == nil {
		b, err := breaker.New(breaker.Config{Name: DefaultBreakerName, Clock: cfg.Clock})
		if err != nil {
			return nil, fmt.Errorf("extract: breaker: %w", err)
		}
		cfg.Breaker = b
	}
	// What the retries and the transport log or report may echo the key.
	logger := redactLogger(cfg.Logger, cfg.APIKey)
	rc := cfg.Retry
	if rc.Clock == nil {
		rc.Clock = cfg.Clock
	}
	if rc.Logger == nil {
		rc.Logger = logger
	} else {
		rc.Logger = redactLogger(rc.Logger, cfg.APIKey)
	}
	if onRetry := rc.OnRetry; onRetry != nil {
		key := cfg.APIKey
		rc.OnRetry = func(ev retry.Event) {
			ev.Err = redact.Error(ev.Err, key)
			onRetry(ev)
		}
	}
	tr, err := transport.New(transport.Config{
		Base:               cfg.Transport,
		Retry:              rc,
		Breaker:            cfg.Breaker,
		AttemptTimeout:     cfg.Timeout,
		RetryNonIdempotent: true,
		Logger:             logger,
	})
	if err != nil {
		return nil, fmt.Errorf("extract: %w: %w", err, ErrInvalidConfig)
	}
	return &LLM{
		endpoint: strings.TrimRight(cfg.URL, "/") + "/chat/completions",
		model:    cfg.Model,
		apiKey:   cfg.APIKey,
		maxRunes: cfg.MaxInputRunes,
		client: &http.Client{
			Transport: tr,
			// A redirect is an answer to report, not to follow with a GET.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		breaker: cfg.Breaker,
		clock:   rc.Clock,
	}, nil
}

// Model returns the model the extractor asks.
func (l *LLM) Model() string { return l.model }

// BreakerState returns the state of the extractor's breaker, so that a
// stage can report it or pause while it is open. An open breaker whose
// delay has passed becomes half-open here.
func (l *LLM) BreakerState() breaker.State { return l.breaker.State() }

// Breaker returns the extractor's breaker, for its Snapshot or to share it.
func (l *LLM) Breaker() *breaker.Breaker { return l.breaker }

// StatusError is the error for a response with a status other than 2xx,
// after the transport's retries.
type StatusError struct {
	// StatusCode and Status are the response's.
	StatusCode int
	Status     string
	// Body is the start of the response body (512 bytes), which usually
	// says what was wrong, with the API key and any echoed credential
	// header replaced by "[REDACTED]".
	Body string
}

func (e *StatusError) Error() string {
	msg := "extract: llm endpoint answered " + e.Status
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Permanent reports whether asking again cannot help: a 4xx status other
// than 408 Request Timeout and 429 Too Many Requests.
func (e *StatusError) Permanent() bool {
	return e.StatusCode >= 400 && e.StatusCode < 500 &&
		e.StatusCode != http.StatusRequestTimeout && e.StatusCode != http.StatusTooManyRequests
}

// UnavailableError is the error of a call the breaker refused, or whose own
// failure opened it. errors.As finds Open in it, and it matches
// breaker.ErrOpen. It is not permanent (the breaker will let calls through
// again), and its retry-after hint is Open.RetryIn.
type UnavailableError struct {
	// Open is the breaker's refusal, with the time until its next probe.
	Open *breaker.OpenError
	// Err is the call's own failure when that failure opened the breaker;
	// nil when the breaker refused the call.
	Err error
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("extract: llm unavailable: %v; %v", e.Err, e.Open)
	}
	return "extract: llm unavailable: " + e.Open.Error()
}

// Unwrap returns Open and, when set, Err.
func (e *UnavailableError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Open, e.Err}
	}
	return []error{e.Open}
}

// Permanent reports false: it hides the breaker's own Permanent mark, meant
// for a retry loop inside one call, from the job engine, which should try
// again once the breaker lets calls through.
func (e *UnavailableError) Permanent() bool { return false }

// RetryAfter returns Open.RetryIn, the time until the breaker's next probe.
func (e *UnavailableError) RetryAfter() time.Duration { return e.Open.RetryIn }

// callError wraps a transport error so that the job engine retries it: the
// transport's Permanent mark was about retrying within the call. err is
// redacted: a proxy's error may echo the request.
type callError struct{ err error }

func (e *callError) Error() string   { return "extract: llm call: " + e.err.Error() }
func (e *callError) Unwrap() error   { return e.err }
func (e *callError) Permanent() bool { return false }

// Extract asks the model for the title, language, key terms and summary of
// in; the word count is computed locally. Poison input is refused before
// any call with a permanent error matching ErrNotText; an open breaker
// fails at once with an *UnavailableError. Fields the model leaves empty or
// gets wrong (a language that is not a two-letter code) are filled as Local
// would fill them. Its errors never show the API key, even where the
// endpoint echoed it: errors.Is and errors.As see through the redaction.
func (l *LLM) Extract(ctx context.Context, in Input) (Result, error) {
	r, err := l.extract(ctx, in)
	if err != nil {
		return Result{}, redact.Error(err, l.apiKey)
	}
	return r, nil
}

func (l *LLM) extract(ctx context.Context, in Input) (Result, error) {
	if err := checkText(in.Text); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if err := l.admit(); err != nil {
		return Result{}, err
	}
	body, err := json.Marshal(l.request(in))
	if err != nil {
		return Result{}, fmt.Errorf("extract: encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint, bytes.NewReader(body))
	if err != nil {
		return Result{}, retry.Permanent(fmt.Errorf("extract: new request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if l.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.apiKey)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return Result{}, fmt.Errorf("extract: llm call: %w", cerr)
		}
		if open, ok := errors.AsType[*breaker.OpenError](err); ok {
			// The breaker refused an attempt, or this call's failure
			// opened it.
			return Result{}, &UnavailableError{Open: open, Err: l.callError(err)}
		}
		return Result{}, l.callError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{}, l.statusError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return Result{}, fmt.Errorf("extract: read llm answer: %w", cerr)
		}
		return Result{}, l.callError(fmt.Errorf("read answer: %w", err))
	}
	ans, err := decodeAnswer(raw)
	if err != nil {
		return Result{}, err
	}
	return l.result(in, ans), nil
}

// admit fails fast when the breaker is open, before the request is built.
// The transport checks again for each attempt.
func (l *LLM) admit() error {
	if l.breaker.State() == breaker.Closed {
		return nil
	}
	t, err := l.breaker.Allow()
	if err != nil {
		if open, ok := errors.AsType[*breaker.OpenError](err); ok {
			return &UnavailableError{Open: open}
		}
		return l.callError(err)
	}
	l.breaker.Done(t, breaker.Ignored) // give the probe slot to the transport
	return nil
}

func (l *LLM) callError(err error) *callError {
	return &callError{redact.Error(err, l.apiKey)}
}

// statusError is the error for a non-2xx response: a *StatusError, with the
// server's Retry-After as a hint, inside an *UnavailableError when the
// failure opened the breaker.
func (l *LLM) statusError(resp *http.Response) error {
	// Read enough past the cut to see a key that begins before it whole.
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, int64(maxErrorBody+len(l.apiKey))))
	se := &StatusError{
		StatusCode: resp.StatusCode,
		Status:     redact.String(resp.Status, l.apiKey),
		Body:       errorBody(raw, l.apiKey),
	}
	var err error = se
	if v := resp.Header.Get("Retry-After"); v != "" && !se.Permanent() {
		if d, perr := transport.ParseRetryAfter(v, l.clock.Now()); perr == nil {
			err = retry.After(se, d)
		}
	}
	if transport.RetryableStatus(resp.StatusCode) && l.breaker.State() == breaker.Open {
		if t, aerr := l.breaker.Allow(); aerr == nil {
			l.breaker.Done(t, breaker.Ignored)
		} else if open, ok := errors.AsType[*breaker.OpenError](aerr); ok {
			return &UnavailableError{Open: open, Err: err}
		}
	}
	return err
}

// errorBody is the start of an error response body, maxErrorBody bytes
// (more where the API key begins before the cut, so that it is masked
// whole), as valid UTF-8 with the key and echoed credentials masked.
func errorBody(raw []byte, key string) string {
	cut := min(len(raw), maxErrorBody)
	if key != "" {
		for i := 0; i < cut; {
			k := bytes.Index(raw[i:], []byte(key))
			if k < 0 || i+k >= cut {
				break
			}
			i += k + len(key)
			cut = max(cut, min(i, len(raw)))
		}
	}
	return redact.String(strings.TrimSpace(strings.ToValidUTF8(string(raw[:cut]), "\uFFFD")), key)
}

// The request and response bodies of the chat-completions API, as far as
// they are used.
type (
	chatRequest struct {
		Model          string         `json:"model"`
		Messages       []chatMessage  `json:"messages"`
		ResponseFormat responseFormat `json:"response_format"`
		Temperature    float64        `json:"temperature"`
	}
	chatMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	responseFormat struct {
		Type string `json:"type"`
	}
	chatResponse struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	// answer is the JSON object the model is asked for.
	answer struct {
		Title    string   `json:"title"`
		Language string   `json:"language"`
		KeyTerms []string `json:"key_terms"`
		Summary  string   `json:"summary"`
	}
)

const systemPrompt = `You extract metadata from a document. Answer with one JSON object and nothing else, with exactly these keys:
"title": a short title for the document (at most 120 characters; the given title if there is one),
"language": the ISO 639-1 code of the document's language, or "und" if unsure,
"key_terms": up to 10 key terms, lower case, most important first,
"summary": a summary of at most 300 characters, in the document's language.`

func (l *LLM) request(in Input) chatRequest {
	text := in.Text
	// Cut after maxRunes runes, found without counting the whole text.
	for i, n := 0, 0; i < len(text); n++ {
		if n == l.maxRunes {
			text = text[:i]
			break
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	var user strings.Builder
	if t := strings.TrimSpace(in.Title); t != "" {
		user.WriteString("Title: " + strings.ToValidUTF8(t, "\uFFFD") + "\n\n")
	}
	user.WriteString(text)
	return chatRequest{
		Model: l.model,
		Messages: []chatMessage{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: user.String()},
		},
		ResponseFormat: responseFormat{Type: "json_object"},
	}
}

// decodeAnswer reads a chat-completions response body and the JSON object
// in its first choice. Its errors match ErrBadAnswer.
func decodeAnswer(raw []byte) (answer, error) {
	var a answer
	if len(raw) > MaxAnswerBytes {
		return a, badAnswer("response longer than %d bytes", MaxAnswerBytes)
	}
	var resp chatResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return a, badAnswer("response is not chat-completions JSON: %v", err)
	}
	if len(resp.Choices) == 0 {
		return a, badAnswer("response has no choices")
	}
	content := resp.Choices[0].Message.Content
	if content == nil {
		return a, badAnswer("first choice has no message content")
	}
	c := strings.TrimSpace(*content)
	// Some models fence the object in a Markdown code block anyway.
	if strings.HasPrefix(c, "```") {
		c = strings.TrimPrefix(strings.TrimPrefix(c, "```json"), "```")
		c = strings.TrimSpace(strings.TrimSuffix(c, "```"))
	}
	if !strings.HasPrefix(c, "{") {
		return a, badAnswer("content is not a JSON object: %q", clip(c, 80))
	}
	dec := json.NewDecoder(strings.NewReader(c))
	if err := dec.Decode(&a); err != nil {
		return answer{}, badAnswer("content is not the JSON object asked for: %v", err)
	}
	if dec.More() {
		return answer{}, badAnswer("content has text after the JSON object")
	}
	return a, nil
}

func badAnswer(format string, args ...any) error {
	return fmt.Errorf("extract: %w: %s", ErrBadAnswer, fmt.Sprintf(format, args...))
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// result merges the model's answer with what is computed locally.
func (l *LLM) result(in Input, a answer) Result {
	loc := local(in)
	r := Result{
		Title:     loc.Title,
		Language:  loc.Language,
		WordCount: loc.WordCount,
		KeyTerms:  loc.KeyTerms,
		Summary:   loc.Summary,
		Extractor: "llm:" + l.model,
	}
	if strings.TrimSpace(in.Title) == "" {
		if t := strings.Join(strings.Fields(a.Title), " "); t != "" {
			r.Title = cutWords(t, MaxTitleRunes, "")
		}
	}
	if code := strings.ToLower(strings.TrimSpace(a.Language)); code == Undetermined || isLanguageCode(code) {
		r.Language = code
	}
	var terms []string
	seen := make(map[string]bool)
	for _, t := range a.KeyTerms {
		t = strings.ToLower(strings.Join(strings.Fields(t), " "))
		if t != "" && !seen[t] && len(terms) < MaxKeyTerms {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	if len(terms) > 0 {
		r.KeyTerms = terms
	}
	if s := strings.Join(strings.Fields(a.Summary), " "); s != "" {
		r.Summary = s
	}
	return r
}

// isLanguageCode reports whether s is two lower-case ASCII letters.
func isLanguageCode(s string) bool {
	return len(s) == 2 && s[0] >= 'a' && s[0] <= 'z' && s[1] >= 'a' && s[1] <= 'z'
}
