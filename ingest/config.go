package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store/appdb"
	"github.com/weirhq/weir/store/postgres"
)

// Defaults of Config, and the files of the data directory.
const (
	// DefaultEventsTopic is the broker topic of the events, with a
	// Broker and no Pipeline.EventsTopic.
	DefaultEventsTopic = "weir.documents"
	// SQLiteFile is the SQLite store in the data directory, without
	// StoreURL.
	SQLiteFile = "weir.db"
	// IndexFile is the search index in the data directory, with IndexFTS.
	IndexFile = "index/search.db"
	// IndexFTS and IndexPostgres are the values of Config.Index: the
	// SQLite FTS5 file in the data directory, and PostgreSQL's full-text
	// search in tables every process on the store shares.
	IndexFTS      = "fts"
	IndexPostgres = "postgres"
	// IndexBreakerName is the name of the search index's circuit breaker.
	IndexBreakerName = "search-index"
	// MinTokenLen is the shortest admin or read token the service takes
	// on an address that is not loopback, in bytes.
	MinTokenLen = 16
)

// Config configures the ingestion service. The zero value of every field
// but DataDir works: a service on the SQLite file in DataDir, with the
// local extractor, no broker and no HTTP server of its own.
type Config struct {
	// DataDir holds incoming/ (the files to ingest), processed/ and
	// failed/, the search index (IndexFile), and, without StoreURL or DB,
	// the SQLite store (SQLiteFile). It is made if missing, unless
	// ReadOnly. Required.
	DataDir string
	// StoreURL is a PostgreSQL URL (postgres:// or postgresql://) of the
	// store, weir's tables and the service's; empty for the SQLite file in
	// DataDir.
	StoreURL string
	// Schema is the PostgreSQL schema of the tables, with StoreURL.
	// Default postgres.DefaultSchema ("weir").
	Schema string
	// DB is a store the caller opened (appdb.Open), which it closes after
	// Stop; StoreURL and Schema must be empty then. Default: the service
	// opens the store StoreURL names, and closes it in Stop.
	DB *appdb.DB
	// ReadOnly opens a service that exists, to query it (Pipeline's
	// Search, Document, Status), making and changing nothing: no folder
	// in DataDir, no index file (a search without one is an error that
	// says so), no table. The store must hold the service's tables at
	// this release's version (else ErrNotMigrated). Start refuses a
	// read-only service. Default false.
	ReadOnly bool

	// Index chooses the search index: IndexFTS, the SQLite FTS5 file
	// IndexFile in DataDir, or IndexPostgres, tables in PostgreSQL
	// (search/pgsearch) that every process on the store shares, in the
	// store's database and schema, or in IndexURL's. Default: IndexFTS
	// with the SQLite store, IndexPostgres with a PostgreSQL one. The
	// index is shared as widely as the store, no more and no less: a
	// PostgreSQL store with IndexFTS (each process's file would hold only
	// what that process indexed, or, in a data directory several
	// processes share, several processes would write one SQLite file) and
	// the SQLite store with IndexPostgres (reconciliation removes from the
	// index what its own store lacks, so stores of their own cannot share
	// one index) are refused.
	Index string
	// IndexURL is a PostgreSQL URL of a database of its own for the
	// IndexPostgres index, in the schema Schema; it implies
	// IndexPostgres. New fails, naming it, when the database does not
	// answer. Default empty: the store's database.
	IndexURL string
	// IndexBreaker admits each call to the index, and joins Breakers.
	// Default: a breaker named IndexBreakerName with the breaker
	// package's defaults (open after 5 failures in 30 s, for 60 s).
	IndexBreaker *breaker.Breaker

	// IncomingURL, ProcessedURL and FailedURL, when any is set, put
	// incoming/, processed/ and failed/ in object storage: each is the URL
	// of a container, or of a folder of one (?prefix=processed/), that
	// gocloud.dev/blob opens: file:///path, azblob://container,
	// s3://bucket, gs://bucket, with the store's credentials from its
	// usual variables (AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY,
	// AWS_ACCESS_KEY_ID, GOOGLE_APPLICATION_CREDENTIALS, ...). One left
	// empty is the data directory's folder, as a file:// container. New
	// fails, naming the field, for an unknown scheme, a container that
	// does not exist or credentials it lacks. Calls to the containers go
	// through one breaker, "blob", which joins Breakers. Default: all
	// empty, the data directory's folders.
	IncomingURL, ProcessedURL, FailedURL string

	// Pipeline holds the pipeline's settings, with pipeline.Config's
	// defaults: its worker id, workers, stages, scan and sweep intervals,
	// reindex schedule, file size limit and events topic. Its DB,
	// DataDir, Index, Extractor, ExtractorName, Logger, Metrics and
	// TracerProvider are set by the service from the fields here: leave
	// them zero.
	Pipeline pipeline.Config

	// Extractor extracts each document. Default: the built-in local
	// extractor (extract.NewLocal), or the LLM's with LLM.URL.
	Extractor pipeline.Extractor
	// ExtractorName says what Extractor is, in the status. Default
	// "local", or "llm" with LLM.URL.
	ExtractorName string
	// LLM, when its URL is set, makes the extractor an OpenAI-compatible
	// API's (extract.NewLLM), whose breaker, "extract-llm", joins
	// Breakers; its Logger defaults to Logger. Exclusive with Extractor.
	LLM extract.LLMConfig
	// Breakers are shown, opened and closed by the admin API, and counted
	// in the metrics. Default none, but the search index's
	// (IndexBreaker) and the LLM extractor's.
	Breakers []*breaker.Breaker

	// Broker, when set, receives an event (pipeline.Event) per document
	// saved or failed: each is written to the outbox in the document's
	// transaction, and an outbox relay the service runs delivers it to
	// Pipeline.EventsTopic (default DefaultEventsTopic), which the service
	// declares. The caller opens the broker and closes it after Stop; one
	// that is down at start is no error: the events wait in the outbox
	// until it is back. Default none: no events.
	Broker broker.Broker

	// Listen is the address the HTTP API, the admin API and the console
	// are served on ("127.0.0.1:8080"; port 0 takes a free one, see
	// Addr). An address that is not loopback requires AdminToken. Default
	// empty: no server; Handler serves them for the caller to mount.
	Listen string
	// AdminToken is the bearer token the admin API (/api/admin/)
	// requires, which opens the read API too. ReadToken opens the read
	// API (search, documents, status, /metrics) but not the admin API.
	// Without either, the read API and the console answer only a
	// loopback Host. Off loopback each must be at least MinTokenLen bytes,
	// without surrounding white space. Default none.
	AdminToken, ReadToken string
	// TokenHint ends the answer to a request without a token, saying
	// where the tokens are configured. Default none.
	TokenHint string

	// Registry receives the engine's metrics and the breakers', and
	// /metrics serves it. Default: a registry of the service's own, with
	// the Go runtime's and the process's collectors.
	Registry *prometheus.Registry
	// TracerProvider makes a span of each stage's attempt and each relay
	// publish. Default none, or OTLPEndpoint's.
	TracerProvider trace.TracerProvider
	// OTLPEndpoint, when set, is an OpenTelemetry collector's OTLP/HTTP
	// URL (http://host:4318; /v1/traces is added) the spans are sent to,
	// in batches, as the service "weir"; Stop sends the last. Exclusive
	// with TracerProvider.
	OTLPEndpoint string
	// Logger receives the service's logs. Default slog.Default().
	Logger *slog.Logger
}

// ErrNotMigrated is returned for a ReadOnly service whose store does not
// hold the service's tables at this release's version.
var ErrNotMigrated = errors.New("ingest: the store does not hold the ingestion service's tables at this release's version")

// check returns an error naming the first field of c whose value is
// refused, and c with its defaults.
func (c Config) check() (Config, error) {
	p := c.Pipeline
	switch {
	case c.DataDir == "":
		return c, errors.New("ingest: Config.DataDir is required")
	case c.DB != nil && (c.StoreURL != "" || c.Schema != ""):
		return c, errors.New("ingest: Config.DB is set: leave StoreURL and Schema empty")
	case p.DB != nil || p.DataDir != "" || p.Index != nil || p.Extractor != nil || p.ExtractorName != "" ||
		p.Logger != nil || p.Metrics != nil || p.TracerProvider != nil:
		return c, errors.New("ingest: Config.Pipeline's DB, DataDir, Index, Extractor, ExtractorName, Logger, Metrics and TracerProvider are the service's: set Config's fields instead")
	case c.Extractor != nil && c.LLM.URL != "":
		return c, errors.New("ingest: Config.Extractor and Config.LLM.URL are both set: choose one")
	case c.TracerProvider != nil && c.OTLPEndpoint != "":
		return c, errors.New("ingest: Config.TracerProvider and Config.OTLPEndpoint are both set: choose one")
	case c.ReadOnly && (c.Listen != "" || c.Broker != nil):
		return c, errors.New("ingest: a ReadOnly service serves no HTTP and publishes no events: leave Listen and Broker empty")
	}
	if err := c.checkIndex(); err != nil {
		return c, err
	}
	if err := c.checkBlobs(); err != nil {
		return c, err
	}
	if c.OTLPEndpoint != "" && !HTTPURL(c.OTLPEndpoint) {
		return c, fmt.Errorf("ingest: Config.OTLPEndpoint %q: want an http:// or https:// URL with a host", redact.URL(c.OTLPEndpoint))
	}
	if c.Listen != "" {
		if err := checkServe(c.Listen, c.AdminToken, c.ReadToken); err != nil {
			return c, err
		}
	}
	if c.Schema == "" && c.DB == nil {
		c.Schema = postgres.DefaultSchema
	}
	if c.Broker != nil && c.Pipeline.EventsTopic == "" {
		c.Pipeline.EventsTopic = DefaultEventsTopic
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// checkServe returns an error unless the service may serve on listen with
// these tokens: an address host:port, and off loopback an admin token,
// each token long enough.
func checkServe(listen, adminToken, readToken string) error {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("ingest: Config.Listen %q is not host:port", listen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("ingest: Config.Listen %q: the port %q is not a number from 0 to 65535", listen, port)
	}
	if Loopback(listen) {
		return nil
	}
	if adminToken == "" {
		return fmt.Errorf("ingest: Config.Listen %s is not a loopback address, and the admin API would be open to the network: set Config.AdminToken", listen)
	}
	for name, tok := range map[string]string{"AdminToken": adminToken, "ReadToken": readToken} {
		if tok == "" {
			continue
		}
		if err := CheckToken(tok); err != nil {
			return fmt.Errorf("ingest: Config.Listen %s is not a loopback address: Config.%s %w", listen, name, err)
		}
	}
	return nil
}

// Loopback reports whether the listen address addr (host:port) binds to
// a loopback interface only: a loopback IP, or the name localhost. An
// empty host (":8080") binds to every interface; any other name is not
// trusted to resolve to loopback.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// CheckToken returns an error naming the rule a token served to the
// network breaks: at least MinTokenLen bytes, no leading or trailing
// white space (which the bearer check would trim, so that the token sent
// could never match).
func CheckToken(token string) error {
	switch {
	case strings.TrimSpace(token) != token:
		return errors.New("must not begin or end with whitespace")
	case len(token) < MinTokenLen:
		return fmt.Errorf("is %d bytes: it must be at least %d bytes long", len(token), MinTokenLen)
	}
	return nil
}

// HTTPURL reports whether s is an http:// or https:// URL with a host,
// as the LLM's and the OTLP collector's URLs must be.
func HTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
