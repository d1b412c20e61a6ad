package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// stageKinds are the job kinds of the ingestion service's stages.
var stageKinds = []string{pipeline.KindParse, pipeline.KindExtract, pipeline.KindSave, pipeline.KindIndex}

// heldJobs says which running stage jobs other workers than self hold by
// a lease: what weir ingest waits for when its progress stops ("" when
// none). A worker that died holds its jobs until its lease ends and the
// rescue gives them back; a live one (a weir run beside) until it is done.
func heldJobs(ctx context.Context, ex store.Executor, self string, now time.Time) (string, error) {
	jobs, err := ex.ListJobs(ctx, store.JobFilter{States: []weirtype.State{weirtype.StateRunning}, Kinds: stageKinds, Limit: store.MaxJobListLimit})
	if err != nil {
		return "", err
	}
	return leaseWait(jobs, self, now), nil
}

// leaseWait describes the running jobs of jobs that owners other than self
// hold, by owner: "waiting for 3 jobs held by host-1234 until 14:05:03
// (lease)". A lease already ended says so: the jobs wait for the next
// rescue. Times are local, to the second.
func leaseWait(jobs []*weirtype.Job, self string, now time.Time) string {
	type held struct {
		n     int
		until time.Time
	}
	byOwner := map[string]*held{}
	for _, j := range jobs {
		if j.State != weirtype.StateRunning || j.LeaseOwner == "" || j.LeaseOwner == self {
			continue
		}
		h := byOwner[j.LeaseOwner]
		if h == nil {
			h = &held{}
			byOwner[j.LeaseOwner] = h
		}
		h.n++
		if j.LeaseExpiresAt.After(h.until) {
			h.until = j.LeaseExpiresAt
		}
	}
	owners := make([]string, 0, len(byOwner))
	for o := range byOwner {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	parts := make([]string, 0, len(owners))
	for _, o := range owners {
		h := byOwner[o]
		jobs := "jobs"
		if h.n == 1 {
			jobs = "job"
		}
		at := h.until.Local().Format("15:04:05")
		if h.until.After(now) {
			parts = append(parts, fmt.Sprintf("%d %s held by %s until %s (lease)", h.n, jobs, o, at))
		} else {
			parts = append(parts, fmt.Sprintf("%d %s held by %s, whose lease ended at %s (back at the next rescue)", h.n, jobs, o, at))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "waiting for " + strings.Join(parts, "; ")
}
