// Package leakcheck finds, in tests, the goroutines that a component
// leaves running after its Stop or Close: take a Snapshot before the
// component starts, stop it, then Check. Goroutines that were running at
// the snapshot are left out, so a test's own helpers and the testing
// package's do not count; those started since must end within the
// timeout Check is given.
//
// Other tests running at the same time start goroutines too: use it in a
// test that does not call t.Parallel (Go runs such a test while the
// parallel ones of its package wait).
package leakcheck

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/eventually"
)

// Snapshot is the set of goroutines running at one moment.
type Snapshot map[int64]bool

// Take returns the goroutines running now.
func Take() Snapshot {
	s := Snapshot{}
	for id := range goroutines() {
		s[id] = true
	}
	return s
}

// Check waits, up to timeout, for the goroutines started since s to end,
// and fails t with the stack of each one still running. A goroutine whose
// stack holds one of ignore is left out: one of a server that runs in the
// test's process, say, which outlives the component under test.
func (s Snapshot) Check(t testing.TB, timeout time.Duration, ignore ...string) {
	t.Helper()
	if left := s.Left(timeout, ignore...); len(left) > 0 {
		t.Fatalf("goroutines still running %v after the component stopped:\n\n%s", timeout, strings.Join(left, "\n\n"))
	}
}

// Left waits, up to timeout, for the goroutines started since s to end,
// those whose stacks hold one of ignore left out, and returns the stacks
// of those still running: none when all ended.
func (s Snapshot) Left(timeout time.Duration, ignore ...string) []string {
	var left []string
	eventually.Wait(timeout, func() (bool, string) {
		left = s.since(ignore)
		return len(left) == 0, ""
	})
	return left
}

// since returns the stacks of the goroutines started after s, the caller's
// own and those whose stacks hold one of ignore left out, in the order of
// their ids.
func (s Snapshot) since(ignore []string) []string {
	all := goroutines()
	ids := make([]int64, 0, len(all))
	for id, g := range all {
		if !s[id] && id != self(all) && !slices.ContainsFunc(ignore, func(x string) bool { return strings.Contains(g.stack, x) }) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = all[id].stack
	}
	return out
}

// goroutine is one goroutine of a dump.
type goroutine struct {
	stack string
	first bool // the dump's first: the goroutine that made it
}

// self returns the id of the goroutine that made the dump all.
func self(all map[int64]goroutine) int64 {
	for id, g := range all {
		if g.first {
			return id
		}
	}
	return 0
}

// goroutines returns every goroutine's stack, by id.
func goroutines() map[int64]goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[int64]goroutine{}
	for i, g := range strings.Split(strings.TrimSpace(string(buf)), "\n\n") {
		// Each begins "goroutine 12 [chan receive]:".
		var id int64
		if f := strings.Fields(g); len(f) >= 2 && f[0] == "goroutine" {
			id, _ = strconv.ParseInt(f[1], 10, 64)
		}
		if id == 0 {
			panic(fmt.Sprintf("leakcheck: unreadable goroutine dump: %.200q", g))
		}
		out[id] = goroutine{stack: g, first: i == 0}
	}
	return out
}
