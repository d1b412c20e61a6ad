package weir

import (
	"time"

	"github.com/weirhq/weir/weirtype"
)

// Metrics receives what the client counts and times: the hooks it calls
// as jobs are inserted, run, abandoned, rescued and swept. Package
// github.com/weirhq/weir/metrics implements it on Prometheus
// (*metrics.Metrics); the engine itself imports no metrics library, so a
// program without metrics does not build one. Every method must be cheap
// and safe for concurrent use.
type Metrics interface {
	// Enqueued records one insert of a job of kind into queue, and what
	// it did.
	Enqueued(kind, queue string, outcome weirtype.InsertOutcome)
	// AttemptDone records one attempt of a job of kind in queue that
	// ended with outcome after running for d.
	AttemptDone(kind, queue string, outcome weirtype.AttemptOutcome, d time.Duration)
	// DeadLettered records one job of kind in queue abandoned to the
	// dead-letter store for reason.
	DeadLettered(kind, queue string, reason weirtype.AbandonReason)
	// Rescued records n running jobs whose lease expired and that were
	// taken back.
	Rescued(n int)
	// Swept records what one stuck sweep did with the jobs of kind.
	Swept(kind string, requeued, skippedBackoff, maxRetriesExceeded int)
	// SweepRun records one run of the stuck sweep that took d and ended
	// with err.
	SweepRun(d time.Duration, err error)
}

// noMetrics is the Metrics of a client whose Config.Metrics is nil.
type noMetrics struct{}

func (noMetrics) Enqueued(string, string, weirtype.InsertOutcome)                    {}
func (noMetrics) AttemptDone(string, string, weirtype.AttemptOutcome, time.Duration) {}
func (noMetrics) DeadLettered(string, string, weirtype.AbandonReason)                {}
func (noMetrics) Rescued(int)                                                        {}
func (noMetrics) Swept(string, int, int, int)                                        {}
func (noMetrics) SweepRun(time.Duration, error)                                      {}
