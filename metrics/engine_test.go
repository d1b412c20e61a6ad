package metrics_test

import (
	"github.com/weirhq/weir"
	"github.com/weirhq/weir/metrics"
)

// The engine reports through weir.Metrics, which *Metrics implements.
var _ weir.Metrics = (*metrics.Metrics)(nil)

// It counts the jobs the retention sweep deletes, through the optional
// weir.RetentionMetrics.
var _ weir.RetentionMetrics = (*metrics.Metrics)(nil)
