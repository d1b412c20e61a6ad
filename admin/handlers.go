package admin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/weirhq/weir/deadletter"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Jobs.

func (h *handler) listJobs(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "state*", "kind*", "queue", "before", "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := store.JobFilter{States: q.states(), Kinds: q.texts("kind"), Queue: q.text("queue"), Before: q.id("before"), Limit: q.limit()}
	if q.err != nil {
		h.fail(w, r, q.err)
		return
	}
	limit := f.Limit
	f.Limit++ // one more tells whether there is a next page
	jobs, err := h.ex.ListJobs(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	jobs, next := page(jobs, limit, func(x *weirtype.Job) int64 { return x.ID })
	writeJSON(w, http.StatusOK, map[string]any{"jobs": jobsOf(jobs), "next_before": next})
}

// byID serves a request on one item, named by the numeric id in its path
// and read (or changed) by do: what names the item in errors ("job"); the
// answer is view of what do returned.
func byID[T any](h *handler, what string, do func(ctx context.Context, id int64) (T, error), view func(T) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, what)
		if err == nil {
			err = noQuery(r)
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		v, err := do(r.Context(), id)
		if err != nil {
			h.fail(w, r, notFound(err, "no %s %d", what, id))
			return
		}
		writeJSON(w, http.StatusOK, view(v))
	}
}

// jobView is a job as the API answers it.
func jobView(j *weirtype.Job) any { return jobOf(j) }

// jobOpKind is an operation on one job.
type jobOpKind int

const (
	opRetry jobOpKind = iota
	opCancel
)

func (h *handler) doJobOp(ctx context.Context, op jobOpKind, id int64) (*weirtype.Job, error) {
	if op == opRetry {
		return h.ex.RetryJob(ctx, h.now(), id)
	}
	return h.ex.Cancel(ctx, h.now(), id)
}

func (h *handler) jobOp(op jobOpKind) http.HandlerFunc {
	return byID(h, "job", func(ctx context.Context, id int64) (*weirtype.Job, error) { return h.doJobOp(ctx, op, id) }, jobView)
}

// BulkResult is what a bulk operation did to one id: the job as it left
// it, or why it did not.
type BulkResult struct {
	ID    int64  `json:"id"`
	Job   *Job   `json:"job,omitempty"`
	Error string `json:"error,omitempty"`
}

func (h *handler) bulkJobOp(op jobOpKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body idsBody
		if err := decodeBody(w, r, h.maxBody, &body); err != nil {
			h.fail(w, r, err)
			return
		}
		ids, err := checkIDs(body.IDs)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		results := make([]BulkResult, 0, len(ids))
		done := 0
		for _, id := range ids {
			j, err := h.doJobOp(r.Context(), op, id)
			switch {
			case err == nil:
				v := jobOf(j)
				results = append(results, BulkResult{ID: id, Job: &v})
				done++
			case errors.Is(err, store.ErrNotFound):
				results = append(results, BulkResult{ID: id, Error: fmt.Sprintf("no job %d", id)})
			case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrFinal), errors.Is(err, store.ErrInvalid):
				results = append(results, BulkResult{ID: id, Error: err.Error()})
			default:
				h.fail(w, r, err)
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"done": done, "failed": len(ids) - done, "results": results})
	}
}

// noQuery refuses any query parameter on an endpoint that takes none.
func noQuery(r *http.Request) error {
	_, err := parseQuery(r)
	return err
}

// notFound replaces a store.ErrNotFound, whose text may name the driver,
// with a 404 saying what is missing; other errors are kept.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return &badRequest{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
	}
	return err
}

// Dead letters.

func (h *handler) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, append([]string{"after", "limit"}, deadLetterParams...)...)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := q.deadLetterFilter(h.now())
	f.AfterID, f.Limit = q.id("after"), q.limit()
	if q.err != nil {
		h.fail(w, r, q.err)
		return
	}
	limit := f.Limit
	f.Limit++
	dls, err := h.ex.ListDeadLetters(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	dls, next := page(dls, limit, func(x *weirtype.DeadLetter) int64 { return x.ID })
	recs := make([]deadletter.Record, len(dls))
	for i, dl := range dls {
		recs[i] = deadletter.RecordOf(dl)
	}
	writeJSON(w, http.StatusOK, map[string]any{"dead_letters": recs, "next_after": next})
}

// exportDeadLetters streams the matching dead letters as JSON Lines. The
// filter is checked, by the store too, before the first byte: after it, an
// error can only end the stream, and is logged.
func (h *handler) exportDeadLetters(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, append([]string{"after", "limit"}, deadLetterParams...)...)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := q.deadLetterFilter(h.now())
	f.AfterID = q.id("after")
	if q.v.Has("limit") {
		f.Limit = q.limit()
	}
	if q.err != nil {
		h.fail(w, r, q.err)
		return
	}
	probe := f
	probe.Limit = 1
	if _, err := h.ex.ListDeadLetters(r.Context(), probe); err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="dead-letters.jsonl"`)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	n, err := deadletter.Export(r.Context(), h.ex, f, bw)
	if err == nil {
		err = bw.Flush()
	}
	switch {
	case err == nil:
	case ClientGone(r, err):
		h.log.Debug("admin export of dead letters ended by the client", "written", n, "err", err)
	default:
		h.log.Error("admin export of dead letters cut short", "written", n, "err", err)
	}
}

// bulkDeadLetterBody selects dead letters by ids, or by a filter.
type bulkDeadLetterBody struct {
	IDs    []int64     `json:"ids"`
	Filter *FilterBody `json:"filter"`
	// Confirm must be true to purge or requeue by filter.
	Confirm bool `json:"confirm"`
}

// selection reads the body's selection: exactly one of ids and filter.
func (h *handler) selection(w http.ResponseWriter, r *http.Request, purge bool) (store.DeadLetterFilter, error) {
	var body bulkDeadLetterBody
	if err := decodeBody(w, r, h.maxBody, &body); err != nil {
		return store.DeadLetterFilter{}, err
	}
	switch {
	case body.IDs != nil && body.Filter != nil:
		return store.DeadLetterFilter{}, bad("give ids or filter, not both")
	case body.IDs != nil:
		ids, err := checkIDs(body.IDs)
		return store.DeadLetterFilter{IDs: ids}, err
	case body.Filter != nil:
		if purge && !body.Confirm {
			return store.DeadLetterFilter{}, bad(`purging by filter deletes every dead letter that matches, and its job: add "confirm": true`)
		}
		if !purge && !body.Confirm {
			return store.DeadLetterFilter{}, bad(`requeueing by filter runs again every dead letter that matches: add "confirm": true`)
		}
		return body.Filter.filter(h.now())
	default:
		return store.DeadLetterFilter{}, bad(`want {"ids": [...]} or {"filter": {...}}`)
	}
}

func (h *handler) requeueDeadLetters(w http.ResponseWriter, r *http.Request) {
	f, err := h.selection(w, r, false)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	jobIDs, err := h.ex.RequeueDeadLetters(r.Context(), h.now(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if jobIDs == nil {
		jobIDs = []int64{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"requeued": len(jobIDs), "job_ids": jobIDs})
}

func (h *handler) purgeDeadLetters(w http.ResponseWriter, r *http.Request) {
	f, err := h.selection(w, r, true)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	n, err := h.ex.PurgeDeadLetters(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"purged": n})
}

// Breakers.

func (h *handler) listBreakers(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]Breaker, len(h.breakerNames))
	for i, name := range h.breakerNames {
		out[i] = breakerOf(h.breakers[name].Snapshot())
	}
	writeJSON(w, http.StatusOK, map[string]any{"breakers": out})
}

func (h *handler) breakerNamed(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if _, ok := h.breakers[name]; !ok {
		return "", &badRequest{status: http.StatusNotFound, msg: fmt.Sprintf("no breaker %s (known: %v)", clip(name), h.breakerNames)}
	}
	return name, noQuery(r)
}

func (h *handler) getBreaker(w http.ResponseWriter, r *http.Request) {
	name, err := h.breakerNamed(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, breakerOf(h.breakers[name].Snapshot()))
}

func (h *handler) breakerOp(open bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, err := h.breakerNamed(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		b := h.breakers[name]
		if open {
			b.Trip()
		} else {
			b.Reset()
		}
		h.log.Info("breaker set by an operator", "breaker", name, "state", b.State().String())
		writeJSON(w, http.StatusOK, breakerOf(b.Snapshot()))
	}
}

// Workflows.

func (h *handler) listWorkflows(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "name", "status", "updated_before", "after", "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := store.WorkflowFilter{Name: q.text("name"), Status: weirtype.WorkflowStatus(q.text("status")),
		UpdatedBefore: q.time("updated_before", h.now()), AfterID: q.text("after"), Limit: q.limit()}
	if q.err == nil && f.Status != "" && !f.Status.Valid() {
		q.err = bad("status %s is unknown: want running, completed or failed", clip(string(f.Status)))
	}
	if q.err != nil {
		h.fail(w, r, q.err)
		return
	}
	limit := f.Limit
	f.Limit++
	wfs, err := h.ex.ListWorkflows(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	wfs, next := page(wfs, limit, func(x *weirtype.Workflow) string { return x.ID })
	out := make([]Workflow, len(wfs))
	for i, wf := range wfs {
		out[i] = workflowOf(wf)
	}
	writeJSON(w, http.StatusOK, map[string]any{"workflows": out, "next_after": next})
}

// getWorkflow answers a workflow and a page of its history, oldest first:
// after_version and limit page it.
func (h *handler) getWorkflow(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("workflow")
	if err := checkText("workflow id", id, true); err != nil {
		h.fail(w, r, err)
		return
	}
	q, err := parseQuery(r, "after_version", "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	after, limit := q.id("after_version"), q.limit()
	if q.err != nil {
		h.fail(w, r, q.err)
		return
	}
	wf, err := h.ex.GetWorkflow(r.Context(), id)
	if err != nil {
		h.fail(w, r, notFound(err, "no workflow %s", clip(id)))
		return
	}
	hist, err := h.ex.ListWorkflowTransitions(r.Context(), id, after, limit+1)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	hist, next := page(hist, limit, func(x *store.WorkflowTransition) int64 { return x.Version })
	writeJSON(w, http.StatusOK, map[string]any{"workflow": workflowOf(wf), "history": transitionsOf(hist), "next_after_version": next})
}

// The outbox, stuck work, reindex.

func (h *handler) outbox(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := h.ex.OutboxBacklog(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var age *float64
	if !b.OldestCreatedAt.IsZero() {
		s := max(h.now().Sub(b.OldestCreatedAt), 0).Seconds()
		age = &s
	}
	writeJSON(w, http.StatusOK, map[string]any{"pending": b.Pending, "oldest_pending_at": at(b.OldestCreatedAt), "oldest_pending_age_seconds": age})
}

// stuck answers the running jobs whose attempt started more than
// older_than ago (default store.DefaultStuckAfter), oldest first, and the
// counts by queue, kind and state with how many of each are stuck.
func (h *handler) stuck(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "older_than", "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	older, limit := q.duration("older_than", store.DefaultStuckAfter), q.limit()
	if q.err == nil && older > maxAge {
		q.err = bad("older_than %v: at most %v", older, maxAge)
	}
	if q.err != nil {
		h.fail(w, r, q.err)
		return
	}
	before := h.now().Add(-older)
	jobs, err := h.ex.ListStuck(r.Context(), before, limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	counts, err := h.ex.CountJobs(r.Context(), before)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]JobCount, len(counts))
	total := 0
	for i, c := range counts {
		out[i] = JobCount{Queue: c.Queue, Kind: c.Kind, State: c.State, Count: c.Count, Stuck: c.Stuck}
		total += c.Stuck
	}
	writeJSON(w, http.StatusOK, map[string]any{"older_than": older.String(), "stuck_before": before.UTC(),
		"stuck": total, "jobs": jobsOf(jobs), "counts": out})
}

func (h *handler) startReindex(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.reindex.StartReindex(r.Context(), ReindexTriggerAPI)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

func (h *handler) reindexRuns(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit := q.limit()
	if q.err != nil {
		h.fail(w, r, q.err)
		return
	}
	runs, err := h.reindex.ReindexRuns(r.Context(), limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if runs == nil {
		runs = []ReindexRun{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": runs})
}

// page trims items, read with one more than limit, to limit, and returns
// the cursor of the next page (the key of its last item), or nil on the
// last page.
func page[T, K any](items []T, limit int, key func(T) K) ([]T, *K) {
	if len(items) <= limit {
		return items, nil
	}
	items = items[:limit]
	k := key(items[limit-1])
	return items, &k
}
