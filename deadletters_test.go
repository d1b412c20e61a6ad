package weir_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// The client lists, shows, requeues and purges dead letters with the
// filters of the CLI and the admin API (job id, ages on the client's
// clock), and refuses a bulk call with paging fields it would ignore.
func TestClientDeadLetterCalls(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var fixed atomic.Bool
		e := newEnvOn(t, open, weir.WorkFunc(func(_ context.Context, j *weir.Job[task]) error {
			if fixed.Load() {
				return nil
			}
			return retry.Permanent(errors.New("unreadable: " + j.Args.Name))
		}), weir.KindConfig{}, nil).start()
		ctx := context.Background()
		// Each job is waited for with the fake clock moving in small
		// steps, as the real one would: a write or a claim that failed
		// under load retries after a backoff on the client's clock.
		dead := func(name string) int64 {
			t.Helper()
			id := e.insert(task{Name: name}, nil).ID
			e.advanceState(id, 100*time.Millisecond, weirtype.StateDead, 1)
			return id
		}
		a, b := dead("a"), dead("b")
		e.advance(2 * time.Hour) // and the client catches up before c
		c := dead("c")
		jobIDs := func(f weir.DeadLetterFilter) []int64 {
			t.Helper()
			dls, err := e.c.ListDeadLetters(ctx, f)
			if err != nil {
				t.Fatalf("list %+v: %v", f, err)
			}
			var out []int64
			for _, d := range dls {
				out = append(out, d.JobID)
			}
			return out
		}
		byJob := func(id int64) weir.DeadLetterFilter {
			return weir.DeadLetterFilter{DeadLetterFilter: store.DeadLetterFilter{JobID: id}}
		}
		for _, tc := range []struct {
			name string
			f    weir.DeadLetterFilter
			want []int64
		}{
			{"all", weir.DeadLetterFilter{}, []int64{a, b, c}},
			{"job id", byJob(b), []int64{b}},
			// On the client's fake clock, two hours after a and b failed.
			{"older than 1h", weir.DeadLetterFilter{OlderThan: time.Hour}, []int64{a, b}},
			{"newer than 1h", weir.DeadLetterFilter{NewerThan: time.Hour}, []int64{c}},
			{"older than 1h, failed before a later time", weir.DeadLetterFilter{OlderThan: time.Hour,
				DeadLetterFilter: store.DeadLetterFilter{FailedBefore: e.fc.Now()}}, []int64{a, b}},
			{"reason", weir.DeadLetterFilter{DeadLetterFilter: store.DeadLetterFilter{Reason: weirtype.AbandonPermanent}}, []int64{a, b, c}},
			{"limit", weir.DeadLetterFilter{DeadLetterFilter: store.DeadLetterFilter{Limit: 1}}, []int64{a}},
		} {
			if got := jobIDs(tc.f); !slices.Equal(got, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
		dls, err := e.c.ListDeadLetters(ctx, byJob(a))
		if err != nil || len(dls) != 1 {
			t.Fatalf("dead letters of job %d: %v, %v", a, dls, err)
		}
		dl, err := e.c.GetDeadLetter(ctx, dls[0].ID)
		if err != nil || dl.JobID != a || compactJSON(t, dl.Payload) != `{"name":"a"}` || dl.LastError != "unreadable: a" || dl.Reason != weirtype.AbandonPermanent {
			t.Fatalf("GetDeadLetter: %+v, %v", dl, err)
		}
		if _, err := e.c.GetDeadLetter(ctx, 424242); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetDeadLetter of a missing id: %v, want ErrNotFound", err)
		}

		// Bad filters are refused, and change nothing.
		for name, f := range map[string]weir.DeadLetterFilter{
			"negative age":   {OlderThan: -time.Hour},
			"negative job":   {DeadLetterFilter: store.DeadLetterFilter{JobID: -1}},
			"unknown reason": {DeadLetterFilter: store.DeadLetterFilter{Reason: "gone"}},
			"limit":          {DeadLetterFilter: store.DeadLetterFilter{Limit: 1}},
			"after id":       {DeadLetterFilter: store.DeadLetterFilter{AfterID: 1}},
		} {
			if n, err := e.c.PurgeDeadLetters(ctx, f); err == nil {
				t.Errorf("purge with %s: %d purged, want an error", name, n)
			}
			if ids, err := e.c.RequeueDeadLetters(ctx, f); err == nil {
				t.Errorf("requeue with %s: %v requeued, want an error", name, ids)
			}
		}
		if got := jobIDs(weir.DeadLetterFilter{}); !slices.Equal(got, []int64{a, b, c}) {
			t.Fatalf("after refused calls the dead letters are %v", got)
		}

		// Requeue one job: it runs again, at once, and completes.
		fixed.Store(true)
		ids, err := e.c.RequeueDeadLetters(ctx, byJob(a))
		if err != nil || !slices.Equal(ids, []int64{a}) {
			t.Fatalf("requeue job %d: %v, %v", a, ids, err)
		}
		j := e.waitState(a, weirtype.StateCompleted, 1)
		if last := j.Errors[len(j.Errors)-1]; last.Type != weirtype.ErrorTypeRequeued || !last.At.Equal(e.fc.Now()) {
			t.Fatalf("the requeued job's last error %+v, want the requeue at the client's time %v", last, e.fc.Now())
		}
		// Purge those that failed within the hour: c only.
		n, err := e.c.PurgeDeadLetters(ctx, weir.DeadLetterFilter{NewerThan: time.Hour})
		if err != nil || n != 1 {
			t.Fatalf("purge newer than 1h: %d, %v; want 1", n, err)
		}
		if got := jobIDs(weir.DeadLetterFilter{}); !slices.Equal(got, []int64{b}) {
			t.Fatalf("dead letters left: %v, want [%d]", got, b)
		}
	})
}
