package pipeline

import "github.com/weirhq/weir/resilience/breaker"

// extractBreaker is the extractor's circuit breaker, when it has one (the
// LLM extractor's): the extract stage's KindConfig names it, so that while
// it is open the engine pauses the stage in the store, in every process,
// and lets one job through as the probe at each probe time, instead of
// claiming and snoozing each waiting document.
func extractBreaker(x Extractor) *breaker.Breaker {
	if b, ok := x.(interface{ Breaker() *breaker.Breaker }); ok {
		return b.Breaker()
	}
	return nil
}
