// Package clock is the source of time for every weir policy that depends on
// it: backoff waits, breaker cooldowns, TTLs, leases and deadlines.
//
// Production code takes a [Clock] through its config and uses [Real] when the
// field is nil. Tests use [Fake], whose time moves only when the test calls
// [Fake.Advance], so a sixty-second breaker cooldown is tested in
// microseconds and without a sleep.
package clock
