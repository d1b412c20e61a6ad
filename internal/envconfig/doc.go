// Package envconfig is the one place where weir reads WEIR_* environment
// variables and maps them onto the config structs of its library packages,
// which never read the environment themselves.
//
// Every variable has a documented default (the README lists them all). A
// value that cannot be used is refused with an error that names the
// variable, the value and what was expected; nothing falls back silently.
package envconfig
