package extract_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
)

func ExampleLocal() {
	in := extract.Input{Text: "Reservoir report\n\n" +
		"The reservoir level fell this week. Engineers inspected the reservoir gates and found a leak. " +
		"The gates will be repaired in March."}
	r, err := extract.NewLocal().Extract(context.Background(), in)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Title)
	fmt.Println(r.Language, r.WordCount, r.Extractor)
	fmt.Println(r.KeyTerms)
	fmt.Println(r.Summary)
	// Output:
	// Reservoir report
	// en 24 local
	// [reservoir gates report level fell week engineers inspected found leak]
	// The reservoir level fell this week. Engineers inspected the reservoir gates and found a leak. The gates will be repaired in March.
}

// Poison input is refused with a permanent error, so the job engine
// dead-letters it at once.
func ExampleErrNotText() {
	_, err := extract.NewLocal().Extract(context.Background(), extract.Input{Text: "%PDF-1.7\x00\x00"})
	fmt.Println(err)
	fmt.Println(errors.Is(err, extract.ErrNotText), retry.IsPermanent(err))
	// Output:
	// extract: input is not text: the text contains a NUL byte at offset 8
	// true true
}

func ExampleLLM_Extract() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":`+
			`"{\"title\":\"Leaking gates\",\"language\":\"en\",\"key_terms\":[\"reservoir\",\"gates\"],\"summary\":\"The gates leak.\"}"}}]}`)
	}))
	defer srv.Close()

	l, err := extract.NewLLM(extract.LLMConfig{URL: srv.URL + "/v1", Model: "small"})
	if err != nil {
		panic(err)
	}
	r, err := l.Extract(context.Background(), extract.Input{Text: "The reservoir gates leak again."})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q %s %d %q %q %s\n", r.Title, r.Language, r.WordCount, r.KeyTerms, r.Summary, r.Extractor)
	// Output:
	// "Leaking gates" en 5 ["reservoir" "gates"] "The gates leak." llm:small
}

// While the breaker is open, Extract fails at once with the breaker's
// *OpenError, whose RetryIn tells a stage how long to snooze.
func ExampleUnavailableError() {
	clk := clock.NewFake(time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC))
	b, _ := breaker.New(breaker.Config{Name: "llm", Clock: clk})
	l, err := extract.NewLLM(extract.LLMConfig{URL: "http://127.0.0.1:1/v1", Breaker: b, Clock: clk})
	if err != nil {
		panic(err)
	}
	b.Trip() // as five failures in 30 s would
	clk.Advance(15 * time.Second)

	_, err = l.Extract(context.Background(), extract.Input{Text: "Some text."})
	var open *breaker.OpenError
	if errors.As(err, &open) {
		fmt.Println("snooze for", open.RetryIn, "- breaker", l.BreakerState())
	}
	fmt.Println(retry.IsPermanent(err))
	// Output:
	// snooze for 45s - breaker open
	// false
}
