package weir

import (
	"context"
	"log/slog"
	"sync"

	"github.com/weirhq/weir/weirtype"
)

// jobLogger is the logger of an attempt of j: the client's log with the
// job's id, kind and attempt on every record. The attributes are added to
// the client's handler on the first record the attempt logs, not before:
// slog's text and JSON handlers format attributes as they are added, and
// most attempts succeed without a line to log.
func jobLogger(log *slog.Logger, j *weirtype.Job) *slog.Logger {
	l := &jobLog{h: jobLogHandler{base: log.Handler(), id: j.ID, kind: j.Kind, attempt: j.Attempt}}
	l.l = *slog.New(&l.h) // one allocation for the logger and its handler
	return &l.l
}

// jobLog is an attempt's logger and its handler.
type jobLog struct {
	l slog.Logger
	h jobLogHandler
}

// jobLogHandler is base with the job's attributes added when a record
// first needs them. An attempt's logger is used from its worker's
// goroutine and from the completer's.
type jobLogHandler struct {
	base    slog.Handler
	id      int64
	kind    string
	attempt int
	once    sync.Once
	h       slog.Handler // base with the job's attributes, once made
}

// with is base with the job's attributes, made on the first call.
func (h *jobLogHandler) with() slog.Handler {
	h.once.Do(func() {
		h.h = h.base.WithAttrs([]slog.Attr{slog.Int64("job_id", h.id), slog.String("kind", h.kind), slog.Int("attempt", h.attempt)})
	})
	return h.h
}

// Enabled asks base: attributes do not change which levels a handler
// takes, and a record below them makes nothing.
func (h *jobLogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.base.Enabled(ctx, level)
}

func (h *jobLogHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.with().Handle(ctx, r)
}

func (h *jobLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with().WithAttrs(attrs)
}

func (h *jobLogHandler) WithGroup(name string) slog.Handler {
	return h.with().WithGroup(name)
}
