package chaos

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natsembed"
	"github.com/weirhq/weir/inbox"
	"github.com/weirhq/weir/ledger"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
	"github.com/weirhq/weir/workflow"
)

// The worker's stable id, and the workflow's name.
const (
	workerID = "chaos-worker"
	flowName = "chaos.document"
)

// maxDeliveries is the consumers' delivery limit: every kill between a
// consumer's commit and its ack costs the message a delivery, so enough
// that kills alone do not exhaust it.
const maxDeliveries = 1000

// WorkerConfig is what a worker process runs.
type WorkerConfig struct {
	// Where are the workload's database and broker.
	Where
	// AckBeforeCommit makes the worker consume the documents' messages
	// with a deliberately wrong consumer, which acks each message, and
	// waits for the server to confirm the ack, before the transaction
	// that starts the document's workflow: a kill in between (crash point
	// consumer.after-early-ack) loses the document. It exists to check
	// that the harness sees that bug.
	AckBeforeCommit bool
}

// Worker runs the workload of cfg until ctx ends: the outbox relay into
// the NATS server of cfg.NATS (or one embedded in the worker, kept in
// cfg.Dir), a consumer that starts each document's workflow, the
// workflow's states, and a consumer that records each workflow's
// notification. It is what `weir chaos` runs, and kills, or leaves running
// while its database fails.
func Worker(ctx context.Context, cfg WorkerConfig, logger *slog.Logger) (err error) {
	defer func() {
		if ctx.Err() != nil {
			err = nil // stopped on request, at whatever point it had reached
		}
	}()
	w := cfg.Where
	if err := w.checkTopics(); err != nil {
		return err
	}
	// The database may be down as the worker starts (a fault of the
	// harness's, or a restart): each step of the start is tried again.
	var d *db
	if err := untilUp(ctx, logger, "open the database", func() (err error) { d, err = openDB(ctx, w); return err }); err != nil {
		return err
	}
	defer d.Close()
	st, dir := d.Store, w.Dir
	b, natsURL, err := openBroker(ctx, w, logger)
	if err != nil {
		return err
	}
	defer b.Close()
	docsTopic, doneTopic := w.docsTopic(), w.doneTopic()
	if err := b.Declare(ctx, docsTopic, doneTopic); err != nil {
		return err
	}

	ws := weir.NewWorkers()
	eng, err := workflow.New(workflow.Config{Store: st, Workers: ws, Logger: logger,
		Definitions: []*workflow.Definition{documentFlow(dir, d.SQL, doneTopic)},
		// Every kill during a state costs it an attempt (its lease
		// expires, or the restart takes it back): enough attempts that
		// kills alone do not exhaust them.
		Step: weir.KindConfig{MaxAttempts: 100, Backoff: backoff.Constant(50 * time.Millisecond).WithJitter(backoff.JitterNone)}})
	if err != nil {
		return err
	}
	client, err := weir.NewClient(weir.Config{Store: st, Workers: ws, ID: workerID, PollEvery: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		return err
	}
	if err := untilUp(ctx, logger, "resume the workflows", func() error { _, err := eng.Resume(ctx); return err }); err != nil {
		return err
	}
	if err := untilUp(ctx, logger, "start the client", func() error { return client.Start(ctx) }); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	relay, err := outbox.New(outbox.Config{Store: st, Broker: b, ID: workerID, Batch: 50, PollEvery: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		return err
	}

	deadLetter := func(ctx context.Context, dl broker.Delivery, reason string, _ error) error {
		_, err := d.SQL.ExecContext(ctx, `INSERT INTO chaos_broker_dead (topic, id, reason) VALUES ($1, $2, $3)`, dl.Topic, dl.ID, reason)
		return err
	}
	starter := inbox.Handle(d.runTx, func(ctx context.Context, tx appdb.Tx, dl broker.Delivery) error {
		_, _, err := eng.Start(ctx, tx.Ex, flowName, string(dl.Body), nil)
		return err
	}, inbox.Config{Logger: logger})
	notified := inbox.Handle(d.runTx, func(ctx context.Context, tx appdb.Tx, dl broker.Delivery) error {
		var n workflow.Notification
		if err := json.Unmarshal(dl.Body, &n); err != nil {
			return retry.Permanent(err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO chaos_notified (doc, status) VALUES ($1, $2)`, n.Workflow, string(n.Status))
		return err
	}, inbox.Config{Logger: logger})

	errs := make(chan error, 3)
	go func() { errs <- relay.Run(ctx) }()
	go func() {
		if cfg.AckBeforeCommit {
			errs <- consumeAckingFirst(ctx, natsURL, docsTopic, "starter-acking-first", starter, logger)
			return
		}
		errs <- b.Consume(ctx, docsTopic, broker.ConsumeOptions{Group: "starter", AckWait: 5 * time.Second, MaxDeliveries: maxDeliveries, DeadLetter: deadLetter}, starter)
	}()
	go func() {
		errs <- b.Consume(ctx, doneTopic, broker.ConsumeOptions{Group: "notified", AckWait: 5 * time.Second, MaxDeliveries: maxDeliveries, DeadLetter: deadLetter}, notified)
	}()
	var first error
	for range 3 {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) && first == nil {
			first = err
		}
	}
	return first
}

// startTimeout bounds how long a worker's start waits for the database.
const startTimeout = 30 * time.Second

// untilUp runs step until it succeeds, ctx ends or startTimeout has
// passed, every 250 ms, and returns its last error.
func untilUp(ctx context.Context, logger *slog.Logger, what string, step func() error) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := step()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		logger.Warn("worker start: "+what+"; trying again", "err", err.Error())
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// openBroker connects to the NATS server of w.NATS or, without one,
// starts a server embedded in the worker, its streams kept in w.Dir/nats,
// on a free loopback port. It returns the broker and the server's URL.
func openBroker(ctx context.Context, w Where, logger *slog.Logger) (broker.Broker, string, error) {
	if w.NATS != "" {
		b, err := nats.Open(ctx, nats.Config{URL: w.NATS, Name: workerID, Logger: logger})
		return b, w.NATS, err
	}
	eb, err := natsembed.Open(ctx, natsembed.Config{Dir: filepath.Join(w.Dir, "nats"), Broker: nats.Config{Logger: logger}})
	if err != nil {
		return nil, "", err
	}
	return eb, eb.URL(), nil
}

// documentFlow is the workflow of one document: upload its pages, each a
// blob file under a generated name, then write its index entry, the same
// way; both through the effect ledger, whose checks look for the files.
// A poison document fails at upload, permanently.
func documentFlow(dir string, db *sql.DB, doneTopic string) *workflow.Definition {
	return &workflow.Definition{Name: flowName, Start: "upload", NotifyTopic: doneTopic, States: map[string]workflow.Handler{
		"upload": func(ctx context.Context, r *workflow.Run) (workflow.Next, error) {
			doc, err := loadDoc(ctx, db, r.Workflow.ID)
			if err != nil {
				return workflow.Next{}, err
			}
			if doc.poison {
				return workflow.Next{}, retry.Permanent(fmt.Errorf("document %s cannot be read", doc.id))
			}
			for page := 1; page <= doc.pages; page++ {
				k := store.EffectKey{Txn: doc.id, Series: "page", Ordinal: int64(page)}
				if _, err := r.Ledger.Do(ctx, k, fileEffect(filepath.Join(dir, "blobs"), fmt.Sprintf("%s.p%d", doc.id, page))); err != nil {
					return workflow.Next{}, err
				}
			}
			return workflow.Goto("index", nil), nil
		},
		"index": func(ctx context.Context, r *workflow.Run) (workflow.Next, error) {
			k := store.EffectKey{Txn: r.Workflow.ID, Series: "index"}
			if _, err := r.Ledger.Do(ctx, k, fileEffect(filepath.Join(dir, "index"), r.Workflow.ID)); err != nil {
				return workflow.Next{}, err
			}
			return workflow.Complete(nil), nil
		},
	}}
}

// fileEffect writes a file named prefix.<random> in dir, as a blob store
// names an upload: written under a temporary name, then renamed, so a file
// with the final name is whole. Writing it twice leaves two files, which
// the checker counts. Its check looks for a file of the prefix.
func fileEffect(dir, prefix string) ledger.Effect {
	return ledger.Effect{
		Run: func(context.Context) (string, error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return "", err
			}
			b := make([]byte, 6)
			if _, err := rand.Read(b); err != nil {
				return "", err
			}
			name := prefix + "." + hex.EncodeToString(b)
			tmp := filepath.Join(dir, name+".tmp")
			if err := os.WriteFile(tmp, []byte(prefix), 0o644); err != nil {
				return "", err
			}
			return name, os.Rename(tmp, filepath.Join(dir, name))
		},
		Check: func(context.Context) (string, bool, error) {
			names, err := effectFiles(dir, prefix)
			if err != nil || len(names) == 0 {
				return "", false, err
			}
			return names[0], true, nil
		},
	}
}

// effectFiles lists the whole files of prefix in dir.
func effectFiles(dir, prefix string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, prefix+".*"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range matches {
		name := filepath.Base(m)
		if strings.HasSuffix(name, ".tmp") || strings.Count(strings.TrimPrefix(name, prefix+"."), ".") > 0 {
			continue
		}
		names = append(names, name)
	}
	return names, nil
}

// doc is a document of the workload.
type doc struct {
	id     string
	poison bool
	pages  int
}

// loadDoc reads the document id.
func loadDoc(ctx context.Context, db *sql.DB, id string) (doc, error) {
	d := doc{id: id}
	if err := db.QueryRowContext(ctx, `SELECT poison, pages FROM chaos_docs WHERE id = $1`, id).Scan(&d.poison, &d.pages); err != nil {
		return doc{}, fmt.Errorf("document %s: %w", id, err)
	}
	return d, nil
}
