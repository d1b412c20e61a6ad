package admin

import (
	"net/http"
	"time"

	"github.com/weirhq/weir/weirtype"
)

// GET /api/admin/limits lists the limits across processes (store.Limits)
// with the attempts of their kinds running.

// Limit is a limit across processes as the admin API (and weir's JSON
// output elsewhere, such as the CLI's) shows it.
type Limit struct {
	Key   string   `json:"key"`
	Kinds []string `json:"kinds"`
	// MaxRunning is 0 when the limit has none, as Rate is.
	MaxRunning int `json:"max_running"`
	Running    int `json:"running"`
	Rate       int `json:"rate"`
	// PerSeconds is the rate's window in seconds; 0 without a rate.
	PerSeconds float64 `json:"per_seconds"`
	// WindowStart and WindowStarts are the rate's window last counted
	// and the starts in it; absent until a start is counted.
	WindowStart  *time.Time `json:"window_start,omitempty"`
	WindowStarts int        `json:"window_starts"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// LimitOf is l as the admin API shows it.
func LimitOf(l *weirtype.Limit) Limit {
	v := Limit{Key: l.Key, Kinds: l.Kinds, MaxRunning: l.MaxRunning, Running: l.Running, Rate: l.Rate,
		PerSeconds: l.Per.Seconds(), WindowStarts: l.WindowStarts, UpdatedAt: l.UpdatedAt.UTC()}
	if v.Kinds == nil {
		v.Kinds = []string{}
	}
	if !l.WindowStart.IsZero() {
		w := l.WindowStart.UTC()
		v.WindowStart = &w
	}
	return v
}

func (h *handler) listLimits(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		h.fail(w, r, err)
		return
	}
	ls, err := h.ex.ListLimits(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]Limit, 0, len(ls))
	for _, l := range ls {
		out = append(out, LimitOf(l))
	}
	writeJSON(w, http.StatusOK, map[string]any{"limits": out})
}
