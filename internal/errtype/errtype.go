// Package errtype names an error's kind for diagnostics (a failed
// attempt's error type, a dead letter's): the Go type of the first error in
// its chain that is not a marker or a wrapper.
package errtype

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/weirhq/weir/resilience/retry"
)

// markers are the types Name always looks through: retry's markers and
// fmt.Errorf's single wrapper.
var markers = func() []reflect.Type {
	e := errors.New("x")
	return []reflect.Type{
		reflect.TypeOf(retry.Permanent(e)),
		reflect.TypeOf(retry.After(e, 0)),
		reflect.TypeOf(fmt.Errorf("%w", e)),
	}
}()

// Name returns the Go type of the first error in err's chain that is not
// one of retry's markers, a fmt.Errorf wrapper, or of the type of one of
// more (a caller's own markers), such as "*fs.PathError".
func Name(err error, more ...error) string {
	transparent := func(t reflect.Type) bool {
		for _, m := range markers {
			if t == m {
				return true
			}
		}
		for _, m := range more {
			if t == reflect.TypeOf(m) {
				return true
			}
		}
		return false
	}
	for transparent(reflect.TypeOf(err)) {
		inner := errors.Unwrap(err)
		if inner == nil {
			break
		}
		err = inner
	}
	return fmt.Sprintf("%T", err)
}
