package extract

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/weirhq/weir/internal/redact"
)

// redactHandler is a slog.Handler that removes the API key, and the
// credentials package redact recognises (an echoed Authorization header, a
// URL's password), from every record before the next handler sees it: the
// retry and transport logs carry the endpoint's errors, which may echo
// the request's headers.
type redactHandler struct {
	next    slog.Handler
	secrets []string
}

// redactLogger returns l logging through a redactHandler, or nil for nil.
func redactLogger(l *slog.Logger, secrets ...string) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(&redactHandler{next: l.Handler(), secrets: secrets})
}

func (h *redactHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *redactHandler) Handle(ctx context.Context, r slog.Record) error {
	clean := slog.NewRecord(r.Time, r.Level, redact.String(r.Message, h.secrets...), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		clean.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, clean)
}

func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &redactHandler{next: h.next.WithAttrs(clean), secrets: h.secrets}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{next: h.next.WithGroup(name), secrets: h.secrets}
}

// attr returns a with its value redacted: strings, errors, groups, and any
// other value whose printed form holds a secret.
func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(redact.String(v.String(), h.secrets...))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			a.Value = slog.AnyValue(redact.Error(err, h.secrets...))
			break
		}
		s := fmt.Sprint(v.Any())
		if clean := redact.String(s, h.secrets...); clean != s {
			a.Value = slog.StringValue(clean)
		} else {
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}
