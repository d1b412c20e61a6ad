// Package budget limits retries across many callers, so that a fleet of
// retrying workers cannot multiply the load on a dependency that is already
// struggling.
//
// A [Budget] counts the calls in flight and the retries in flight. A retry is
// allowed while the retries in flight stay within Ratio × calls in flight, or
// within MinRetries, whichever is larger. With the defaults (20%, floor 3) a
// hundred concurrent calls may have at most twenty retries waiting or running
// at once; a lone caller may still retry.
//
// One Budget is meant to be shared: pass the same *Budget to every retry
// policy that calls the same dependency.
package budget
