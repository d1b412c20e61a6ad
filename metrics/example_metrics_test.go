package metrics_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/weirtype"
)

// Register weir's metrics on a registry of one's own, record what an
// engine would, and read the counters back.
func Example() {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	m.Enqueued("extract", "default", weirtype.Inserted)
	m.AttemptDone("extract", "default", metrics.Completed, 120*time.Millisecond)
	m.AttemptDone("extract", "default", metrics.Failed, 3*time.Second)
	m.DeadLettered("extract", "default", weirtype.AbandonPermanent)
	m.Swept("extract", 2, 1, 0)
	m.SweepRun(40*time.Millisecond, errors.New("database is locked"))

	families, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		switch f.GetName() {
		case "weir_jobs_completed_total", "retry_job_documents_requeued_total":
		default:
			continue
		}
		for _, s := range f.GetMetric() {
			fmt.Print(f.GetName(), "{")
			for i, l := range s.GetLabel() {
				if i > 0 {
					fmt.Print(",")
				}
				fmt.Printf("%s=%q", l.GetName(), l.GetValue())
			}
			fmt.Println("}", s.GetCounter().GetValue())
		}
	}

	// Metrics left nil record nothing, so an engine need not check.
	var none *metrics.Metrics
	none.Rescued(1)
	// Output:
	// retry_job_documents_requeued_total{collection="extract"} 2
	// weir_jobs_completed_total{kind="extract",queue="default"} 1
}
