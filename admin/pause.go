package admin

import (
	"net/http"
	"strings"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Pauses: GET /api/admin/pauses lists what is paused; POST
// /api/admin/pauses pauses a queue, or a kind within it; POST
// /api/admin/pauses/resume ends the pauses of one.

// Pause is a paused queue or kind as the admin API answers it.
type Pause struct {
	Queue string `json:"queue"`
	// Kind is empty when the whole queue is paused.
	Kind string `json:"kind,omitempty"`
	// Cause is operator, breaker or retry_after.
	Cause    string    `json:"cause"`
	By       string    `json:"by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	PausedAt time.Time `json:"paused_at"`
	// Until is when a retry_after pause ends, or when a breaker's next
	// probe may run; absent for an operator's, which lasts until resumed.
	Until *time.Time `json:"until,omitempty"`
}

// PauseOf is p as the admin API (and weir's JSON output elsewhere, such as
// the CLI's) shows it.
func PauseOf(p *weirtype.Pause) Pause {
	v := Pause{Queue: p.Queue, Kind: p.Kind, Cause: string(p.Cause), By: p.By, Reason: p.Reason, PausedAt: p.PausedAt.UTC()}
	if !p.Until.IsZero() {
		u := p.Until.UTC()
		v.Until = &u
	}
	return v
}

func pausesOf(ps []*weirtype.Pause) []Pause {
	out := make([]Pause, len(ps))
	for i, p := range ps {
		out[i] = PauseOf(p)
	}
	return out
}

// defaultPausedBy is who a pause through the admin API is by, when the
// request does not say.
const defaultPausedBy = "admin API"

func (h *handler) listPauses(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		h.fail(w, r, err)
		return
	}
	ps, err := h.ex.ListPauses(r.Context(), h.now())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"pauses": pausesOf(ps)})
}

// pauseBody is the body of POST /api/admin/pauses.
type pauseBody struct {
	Queue  string `json:"queue"`
	Kind   string `json:"kind"`
	By     string `json:"by"`
	Reason string `json:"reason"`
}

func (h *handler) pause(w http.ResponseWriter, r *http.Request) {
	var body pauseBody
	if err := decodeBody(w, r, h.maxBody, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	if body.By == "" {
		body.By = defaultPausedBy
	}
	now := h.now()
	p, err := store.PauseParams{Queue: body.Queue, Kind: body.Kind, By: body.By, Reason: body.Reason}.Normalize(now)
	if err != nil {
		// The checks' own words: they name the field, and no driver.
		h.fail(w, r, bad("%s", strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": ")))
		return
	}
	paused, err := h.ex.Pause(r.Context(), now, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.Info("paused by an operator", "queue", p.Queue, "kind", p.Kind, "by", p.By, "reason", p.Reason)
	writeJSON(w, http.StatusOK, PauseOf(paused))
}

// resumeBody is the body of POST /api/admin/pauses/resume.
type resumeBody struct {
	Queue string `json:"queue"`
	Kind  string `json:"kind"`
	// Cause, when set, ends only the pause of that cause.
	Cause string `json:"cause"`
}

func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	var body resumeBody
	if err := decodeBody(w, r, h.maxBody, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	cause := weirtype.PauseCause(body.Cause)
	switch {
	case body.Queue == "":
		h.fail(w, r, bad("queue is empty: name the queue to resume"))
		return
	case cause != "" && !cause.Valid():
		h.fail(w, r, bad("cause %s is unknown: want operator, breaker or retry_after", clip(body.Cause)))
		return
	}
	ended, err := h.ex.Resume(r.Context(), body.Queue, body.Kind, cause)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.Info("resumed by an operator", "queue", body.Queue, "kind", body.Kind, "cause", body.Cause)
	writeJSON(w, http.StatusOK, map[string]any{"resumed": pausesOf(ended)})
}
