// Package weir is a durable pipeline engine for Go: work that was accepted is
// never lost and never repeats a side effect.
//
// This root package will hold the engine's public API: the client, its
// config, the handler types and the errors. It is empty until the job engine
// lands. Today weir provides its resilience layer, which every later part
// builds on:
//
//   - [github.com/weirhq/weir/resilience]: running a call under several
//     policies in a stated order;
//   - [github.com/weirhq/weir/resilience/backoff], retry, breaker, budget,
//     timeout and transport: the policies themselves;
//   - [github.com/weirhq/weir/clock]: the injected clock that lets every
//     time-dependent policy be tested without sleeping.
package weir
