package weir

import (
	"testing"
	"time"

	"github.com/weirhq/weir/weirtype"
)

// An operator's retry starts a job's TTL again, as a requeue does: an old
// job retried is not abandoned as ttl_exceeded at its first failure.
func TestTTLStartsAgainAtARetry(t *testing.T) {
	made := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	requeued, retried := made.Add(time.Hour), made.Add(48*time.Hour)
	j := &weirtype.Job{CreatedAt: made, Errors: []weirtype.AttemptError{
		{Type: "boom", At: made.Add(time.Minute)},
		{Type: weirtype.ErrorTypeRequeued, At: requeued},
		{Type: weirtype.ErrorTypeRetried, At: retried},
		{Type: "boom", At: retried.Add(time.Minute)},
	}}
	if got := ttlStart(j); !got.Equal(retried) {
		t.Fatalf("ttl start %v, want the retry at %v", got, retried)
	}
	j.Errors = j.Errors[:2]
	if got := ttlStart(j); !got.Equal(requeued) {
		t.Fatalf("ttl start %v, want the requeue at %v", got, requeued)
	}
}
