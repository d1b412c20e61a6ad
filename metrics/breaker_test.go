package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/resilience/breaker"
)

var errDown = errors.New("dependency down")

func newBreaker(t *testing.T, name string, clk clock.Clock) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(breaker.Config{
		Name:      name,
		Strategy:  breaker.Consecutive(3),
		OpenDelay: time.Minute,
		Clock:     clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func call(b *breaker.Breaker, err error) {
	_ = b.Do(context.Background(), func(context.Context) error { return err })
}

func registerBreakers(t *testing.T, bs ...*breaker.Breaker) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(metrics.NewBreakerCollector(bs...)); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return reg
}

// TestBreakerCollectorFollowsTheStates walks a breaker through closed,
// open and half-open and back, reading the gauges at each step.
func TestBreakerCollectorFollowsTheStates(t *testing.T) {
	clk := clock.NewFake(t0)
	llm := newBreaker(t, "llm", clk)
	reg := registerBreakers(t, llm, nil)

	check := func(step string, state, failures, successes, consecutive, rejected float64) {
		t.Helper()
		for name, want := range map[string]float64{
			"weir_breaker_state":                state,
			"weir_breaker_failures":             failures,
			"weir_breaker_successes":            successes,
			"weir_breaker_consecutive_failures": consecutive,
			"weir_breaker_rejected":             rejected,
		} {
			got := gather(t, reg, name)
			if len(got) != 1 || got["breaker=llm"].value != want {
				t.Errorf("%s: %s = %v, want one series breaker=llm of %v", step, name, got, want)
			}
		}
	}

	check("new", metrics.BreakerClosed, 0, 0, 0, 0)
	call(llm, errDown)
	call(llm, errDown)
	check("two failures", metrics.BreakerClosed, 2, 0, 2, 0)
	call(llm, errDown)
	call(llm, nil) // refused: the breaker is open
	call(llm, nil)
	check("open", metrics.BreakerOpen, 3, 0, 3, 2)
	clk.Advance(time.Minute)
	check("open delay passed", metrics.BreakerHalfOpen, 0, 0, 0, 0)
	call(llm, nil) // the probe succeeds and closes the breaker
	check("probe succeeded", metrics.BreakerClosed, 0, 0, 0, 0)
	llm.Trip()
	check("tripped", metrics.BreakerOpen, 0, 0, 0, 0)
}

func TestBreakerCollectorExposition(t *testing.T) {
	clk := clock.NewFake(t0)
	a, b := newBreaker(t, "ocr", clk), newBreaker(t, "llm", clk)
	b.Trip()
	reg := registerBreakers(t, a, b)
	const want = `
# HELP weir_breaker_state State of the circuit breaker: 0 closed, 1 half-open, 2 open.
# TYPE weir_breaker_state gauge
weir_breaker_state{breaker="llm"} 2
weir_breaker_state{breaker="ocr"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "weir_breaker_state"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 10 {
		t.Errorf("GatherAndCount = %d, %v; want 10 series (5 per breaker)", n, err)
	}
}

func TestBreakerCollectorWithNoBreakersExportsNothing(t *testing.T) {
	reg := registerBreakers(t)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("GatherAndCount = %d, %v; want 0", n, err)
	}
}

func TestBreakerCollectorRefusesTwoBreakersOfOneName(t *testing.T) {
	clk := clock.NewFake(t0)
	reg := prometheus.NewPedanticRegistry()
	err := reg.Register(metrics.NewBreakerCollector(newBreaker(t, "llm", clk), newBreaker(t, "llm", clk)))
	if err == nil || !strings.Contains(err.Error(), `two circuit breakers are named "llm"`) {
		t.Fatalf("Register = %v, want an error naming the shared name", err)
	}
}

func TestBreakerCollectorIsRegisteredOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBreaker(t, "llm", clk)
	reg := registerBreakers(t, b)
	err := reg.Register(metrics.NewBreakerCollector(newBreaker(t, "ocr", clk)))
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("second Register = %v, want an AlreadyRegisteredError (the names are taken)", err)
	}
}

// TestBreakerCollectorBesideMetrics checks that the breaker gauges take no
// name of New's collectors, so both register on one registry.
func TestBreakerCollectorBesideMetrics(t *testing.T) {
	_, reg := newMetrics(t, metrics.Options{Store: &fakeStore{ex: &fakeExecutor{}}})
	if err := reg.Register(metrics.NewBreakerCollector(newBreaker(t, "llm", clock.NewFake(t0)))); err != nil {
		t.Fatalf("Register beside New's collectors: %v", err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
