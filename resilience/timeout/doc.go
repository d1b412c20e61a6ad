// Package timeout bounds how long one call may take.
//
// [Policy.Do] runs the function on the caller's goroutine with a context that
// ends after the policy's duration. When the function returns after that
// deadline with an error, Do returns a [*Error] that matches [ErrTimeout], so
// a retry policy can retry it and a circuit breaker counts it as a failure of
// the dependency. When the caller's own context ends first, the caller's error
// is returned unchanged: that is a cancellation, not a timeout.
//
// The function must honour its context; Do never abandons a running
// function, so a timeout never leaks a goroutine.
package timeout
