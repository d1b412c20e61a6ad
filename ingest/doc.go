// Package ingest is weir's document-ingestion service put together: the
// composition root of `weir run`, callable by a program that embeds the
// service. It is built on the engine's public packages only (the root
// package, store/appdb, outbox, broker, admin, ui, metrics) and on the
// product's own (ingest/pipeline, ingest/extract, ingest/search/fts,
// ingest/api).
//
// New opens what a Config names (the store and the service's tables, the
// search index, the extractor with its breaker, the outbox relay to a
// broker, the HTTP handler with the admin API and the console, the write
// probe of /readyz, tracing); Start runs it; Stop stops and closes it.
// Run does all three until its context ends:
//
//	err := ingest.Run(ctx, ingest.Config{
//		DataDir: "/var/lib/weir",                   // incoming/, processed/, failed/, the index, weir.db
//		Listen:  "127.0.0.1:8080",                  // the API, /api/admin/, /ui/, /metrics
//		Broker:  b,                                 // optional: events through the outbox
//		LLM:     extract.LLMConfig{URL: llmURL},    // optional: extract with a model
//	})
//
// The weir command maps its flags and WEIR_* variables onto Config and
// calls this package; a library reads no environment.
package ingest
