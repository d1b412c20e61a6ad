package nats

import "github.com/nats-io/nats.go/jetstream"

// JetStream returns b's JetStream context, for the external tests that
// look at or delete streams.
func JetStream(b *Broker) jetstream.JetStream { return b.js }

// StreamName returns the name of topic's stream on b (see Declare).
func StreamName(b *Broker, topic string) string { return b.streamName(topic) }
