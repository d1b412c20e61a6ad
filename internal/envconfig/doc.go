// Package envconfig is the one place where weir reads WEIR_* environment
// variables and maps them onto the config structs of its library packages,
// which never read the environment themselves.
//
// Every variable has a documented default (the README lists them all).
// The event-retry settings are also read from the RETRY_* names weir's
// event-retry spec gives them, when their WEIR_RETRY_* variable is unset;
// the WEIR_ name wins when both are set. A value that cannot be used is
// refused with an error that names the variable it was read from, the
// value and what was expected; nothing falls back silently.
package envconfig
