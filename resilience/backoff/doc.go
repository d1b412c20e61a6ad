// Package backoff computes how long to wait before a retry.
//
// A [Backoff] has a schedule (exponential, constant or linear) and a jitter
// mode. Its zero value is the default from weir's resilience spec:
// exponential from 1 s, doubling, capped at 60 s, with ±20% proportional
// jitter.
//
// Retries are numbered from 1: Delay(1, …) is the wait before the first
// retry (the second attempt). Let d be the schedule's delay for retry n:
//
//	Exponential  d = min(Cap, Base × Factor^(n-1))
//	Constant     d = min(Cap, Base)
//	Linear       d = min(Cap, Base + Step × (n-1))
//
// The jitter mode turns d into the delay actually waited. Every mode stays
// inside documented bounds, which the package's property tests check:
//
//	None          exactly d
//	Full          uniform in [0, d]
//	Equal         uniform in [d/2, d]
//	Proportional  uniform in [d×(1-p), min(Cap, d×(1+p))]
//	Decorrelated  uniform in [Base, min(Cap, 3×prev)], prev being the
//	              previous delay (Base before the first retry); the
//	              schedule is not used. This is the AWS decorrelated
//	              jitter, except that the cap bounds the range drawn
//	              from instead of clipping the draw, so delays near the
//	              cap are spread rather than piled on it.
//
// The delay never exceeds Cap, except that a Cap below Base is raised to
// Base.
package backoff
