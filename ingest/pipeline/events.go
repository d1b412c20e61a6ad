package pipeline

import (
	"context"
	"encoding/json"
	"time"

	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
)

// The types of the events the service publishes.
const (
	EventSaved  = "document.saved"  // its extraction is in SQL; its index write follows
	EventFailed = "document.failed" // it is in failed/ and the dead-letter store
)

// Event tells a document's end to the broker, when Config.EventsTopic is
// set. It is written to the outbox in the transaction that saves or fails
// the document, so it is published at least once, with the outbox's stable
// message id (consumers dedupe with it), and in order per document (its
// key).
type Event struct {
	Type     string    `json:"type"`
	Document string    `json:"document"`
	File     string    `json:"file"`
	Source   string    `json:"source"`
	Path     string    `json:"path"`
	Key      string    `json:"key,omitempty"`
	Title    string    `json:"title,omitempty"`
	Language string    `json:"language,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Error    string    `json:"error,omitempty"`
	At       time.Time `json:"at"`
}

// event adds e to the outbox in tx, if the service publishes events.
func (s *Service) event(ctx context.Context, tx appdb.Tx, e Event) error {
	if s.cfg.EventsTopic == "" {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = outbox.Add(ctx, tx.Ex, e.At, store.OutboxMessage{Topic: s.cfg.EventsTopic, Key: e.Document, Payload: b,
		Headers: map[string]string{"Weir-Event": e.Type}})
	return err
}
