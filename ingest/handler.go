package ingest

import (
	"context"
	"net/http"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/ingest/api"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ui"
)

// newHandler is the service's HTTP handler: the read API, with the admin
// API under /api/admin/, behind adminToken when it is set, and the web
// console under /ui/ ("/" redirects there); metrics serves /metrics.
//
// Every path but /healthz and /readyz is guarded against other sites
// (admin.Protect): the read API (search, documents, status, /metrics)
// takes the admin token or the read token when either is set, and answers
// only a loopback Host when neither is; the console's files, which hold
// no data, are public once a token is set (the console asks for it), and
// answer only a loopback Host otherwise. /healthz and /readyz answer any
// Host, for load balancers: they tell whether the service is up and ready,
// nothing else.
func newHandler(s *Service, adminToken, readToken string, metrics http.Handler) (http.Handler, error) {
	adm, err := admin.New(admin.Config{Store: s.db.Store.Executor(), Token: adminToken, Breakers: s.breakers,
		Reindex: s.pipe, Logger: s.cfg.Logger})
	if err != nil {
		return nil, err
	}
	apiHandler, err := api.New(api.Config{Service: served{s.pipe, s}, Metrics: metrics, Admin: adm, Logger: s.cfg.Logger,
		Tokens: []string{adminToken, readToken}, TokenHint: s.cfg.TokenHint})
	if err != nil {
		return nil, err
	}
	console, err := ui.New()
	if err != nil {
		return nil, err
	}
	redirect := ui.Redirect()
	if adminToken == "" && readToken == "" {
		console, redirect = admin.Protect(console, ""), admin.Protect(redirect, "")
	}
	mux := http.NewServeMux()
	mux.Handle(ui.Prefix, console)
	mux.Handle("GET /{$}", redirect)
	mux.Handle("/", apiHandler)
	return mux, nil
}

// served is what the API serves: the pipeline's queries, and the
// service's readiness, which probes writes too.
type served struct {
	*pipeline.Service
	s *Service
}

func (v served) Ready(ctx context.Context) error { return v.s.Ready(ctx) }
