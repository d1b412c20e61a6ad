package weir_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/weirtype"
)

// A limit below the workers' count does not make its queue look empty: a
// claim the limit cut short is followed by the next as the kind's
// attempts end and their successes are written, so that the jobs run one
// after another with the clock standing, where the producer used to wait
// for PollEvery after every claim.
func TestLimitedQueueClaimsAsAttemptsEnd(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var ran atomic.Int64
		w := weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
			ran.Add(1)
			return nil
		})
		e := newEnvOn(t, open, w, weir.KindConfig{MaxRunning: 2}, nil).start()
		const n = 30
		ids := make([]int64, 0, n)
		for range n {
			ids = append(ids, e.insert(task{}, nil).ID)
		}
		eventually.True(t, "every job run with the clock standing", waitLimit, func() (bool, string) {
			return ran.Load() == n, fmt.Sprintf("%d of %d run", ran.Load(), n)
		})
		for _, id := range ids {
			e.waitState(id, weirtype.StateCompleted, 1)
		}
	})
}
