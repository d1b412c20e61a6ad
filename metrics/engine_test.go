package metrics_test

import (
	"github.com/weirhq/weir"
	"github.com/weirhq/weir/metrics"
)

// The engine reports through weir.Metrics, which *Metrics implements.
var _ weir.Metrics = (*metrics.Metrics)(nil)
