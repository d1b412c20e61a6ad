package errtype_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/weirhq/weir/internal/errtype"
	"github.com/weirhq/weir/resilience/retry"
)

type marker struct{ err error }

func (m *marker) Error() string { return m.err.Error() }
func (m *marker) Unwrap() error { return m.err }

func TestName(t *testing.T) {
	pe := &fs.PathError{Op: "open", Path: "x", Err: errors.New("gone")}
	for _, c := range []struct {
		err  error
		more []error
		want string
	}{
		{pe, nil, "*fs.PathError"},
		{retry.Permanent(fmt.Errorf("read: %w", pe)), nil, "*fs.PathError"},
		{retry.After(pe, 0), nil, "*fs.PathError"},
		{&marker{pe}, nil, "*errtype_test.marker"},
		{&marker{pe}, []error{&marker{}}, "*fs.PathError"},
		{fmt.Errorf("no cause"), nil, "*errors.errorString"},
	} {
		if got := errtype.Name(c.err, c.more...); got != c.want {
			t.Errorf("Name(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
