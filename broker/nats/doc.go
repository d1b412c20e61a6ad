// Package nats is weir's broker.Broker over NATS JetStream, against a NATS
// server of one's own (Open). Package natsembed runs the same driver over
// a server started in the process, storing in a directory: weir's
// single-machine broker. This package does not build the server in.
//
// # Streams
//
// Declare makes one stream per topic, with the topic as its only subject:
// file storage, limits retention (a message stays once acknowledged, so
// that every group gets it; Config.MaxAge bounds how long), and a
// duplicate window of Config.DedupeWindow, 2 min by default. The stream's
// name is Config.StreamPrefix ("WEIR_") followed by the topic with each
// character other than a letter, digit, '_' or '-' made '_' and, when one
// was (or the topic is longer than 64 bytes), '_' and eight hex digits of
// the topic's SHA-256: topic "orders.created" has stream
// "WEIR_orders_created_" followed by the hash's digits.
//
// # Publishing
//
// Publish sends each message to its topic's subject with its id as
// Nats-Msg-Id, its key in the Weir-Key header and its headers as NATS
// headers, names kept as given, and waits for the stream's PubAck of each.
// A PubAck that reports a duplicate counts as a confirm: the stream holds
// the message. The connection has no reconnect buffer: while it is lost,
// Publish fails at once, with a *broker.PublishError, rather than keeping
// messages in memory. The connection is made again, with backoff (50 ms
// doubling up to Config.ReconnectWait, ±10%), for as long as the Broker is
// open.
// Without a connection Declare and Publish fail at once, with errors that
// wrap broker.ErrNotConnected. Open fails when it cannot connect, unless
// Config.RetryFirstConnect lets it go on connecting in the background (a
// server that refuses the credentials or the TLS setup still fails it).
// Connected reports the connection's state (broker.Connectivity), which an
// outbox relay reads to probe the broker as soon as it is back.
//
// # The embedded server
//
// natsembed.Open runs the server in the process, its streams in a
// directory, for one process per directory (a second Open on it fails
// with natsembed.ErrDirInUse), and returns this package's Broker over it.
// Processes that share a broker need a NATS server of their own, or
// RabbitMQ.
//
// # Consuming
//
// A group is a durable pull consumer of the topic's stream, named as a
// stream is but without the prefix (group "weir" is consumer "weir"):
// explicit acks, ConsumeOptions.AckWait, and ConsumeOptions.MaxDeliveries
// as its MaxDeliver. Consume runs up to ConsumeOptions.Prefetch handlers
// at once and asks the server for as many messages as it has free
// handlers. A message is acknowledged after its handler returned nil;
// one whose handler failed is delivered again after Config.NakDelay; one
// whose handler failed permanently (retry.Permanent) or at its last
// delivery is handed to ConsumeOptions.DeadLetter, then terminated.
// Delivery.Attempt is the server's delivery count. Requests that fail, the
// server being restarted, are made again with backoff (100 ms doubling up
// to 5 s, ±10%, timed on Config.Clock).
//
// # The max-deliveries advisory
//
// A message whose consumer died during each of its MaxDeliveries
// deliveries never had a handler's error to act on. The server gives up
// on it and publishes an advisory on
// $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>. Each
// Consume subscribes to its consumer's advisories, as a queue group, so
// that one member of the group receives each. That member reads the
// message from the stream by its sequence and hands it to DeadLetter with
// broker.ReasonMaxDeliveries and a nil last error (or the last error of a
// handler in that process, if one failed and its dead-lettering did not
// succeed), retrying with backoff until DeadLetter accepts it or Consume
// ends. The message stays in the stream, which other groups may be
// reading; the server does not deliver it to this group again.
//
// The handler path terminates the messages it dead-letters, for which the
// server sends no advisory, and the Broker remembers, for ten minutes, the
// messages it dead-lettered and the deliveries whose handler runs: an
// advisory for a delivery whose handler still runs (past AckWait, at the
// last delivery) is left to that handler, and one for a message already
// dead-lettered is dropped. Two cases can still dead-letter a message
// twice, so a DeadLetter function should recognise a message id it has
// seen: the advisory reaching another process of the group than the one
// whose handler ran past AckWait, and a lost terminate. An advisory is a
// plain NATS message: one sent while no member of the group is connected
// is lost, and its message stays in the stream, undelivered to the group.
package nats
