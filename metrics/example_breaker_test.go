package metrics_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/resilience/breaker"
)

// Export the state of circuit breakers beside weir's metrics.
func ExampleNewBreakerCollector() {
	llm, err := breaker.New(breaker.FailureRateConfig("llm"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ocr, err := breaker.New(breaker.Config{Name: "ocr"})
	if err != nil {
		fmt.Println(err)
		return
	}
	llm.Trip()

	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg, metrics.Options{}); err != nil {
		fmt.Println(err)
		return
	}
	if err := reg.Register(metrics.NewBreakerCollector(llm, ocr)); err != nil {
		fmt.Println(err)
		return
	}

	families, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		if f.GetName() != "weir_breaker_state" {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Printf("%s{breaker=%q} %v\n", f.GetName(), m.GetLabel()[0].GetValue(), m.GetGauge().GetValue())
		}
	}
	// Output:
	// weir_breaker_state{breaker="llm"} 2
	// weir_breaker_state{breaker="ocr"} 0
}
