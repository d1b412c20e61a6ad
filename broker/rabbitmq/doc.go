// Package rabbitmq is the RabbitMQ driver of package broker, built on
// github.com/rabbitmq/amqp091-go. It passes broker/brokertest against a
// real server.
//
// # Topology
//
// Declare makes, for each topic:
//
//   - a durable quorum queue named by the topic (x-queue-type=quorum), with
//     x-delivery-limit = Config.DeliveryLimit, x-dead-letter-exchange =
//     Config.DeadLetterExchange and x-dead-letter-routing-key = the topic,
//     and, on RabbitMQ 3.10 or later, x-dead-letter-strategy=at-least-once
//     with x-overflow=reject-publish (which at-least-once dead-lettering
//     requires). On an older server those two are left out, and the
//     Broker logs, at its first connection, that dead-lettering is then
//     at most once;
//   - its dead-letter queue, topic+".dlq", a durable quorum queue bound to
//     the dead-letter exchange (a durable direct exchange, "weir.dlx" by
//     default) with the topic as the binding key.
//
// Declaring again is a no-op. RabbitMQ cannot change the arguments of a
// queue: when one exists with others (another delivery limit, a classic
// queue) Declare fails with an error wrapping ErrQueueMismatch.
//
// Publish sends each message persistent (delivery mode 2) to the default
// exchange with the topic as the routing key, its ID as the AMQP
// message-id, its Key in the x-weir-key header and its Headers as AMQP
// headers, on a channel in confirm mode, and waits for every confirm.
// Messages are published mandatory, so one to a topic without a queue is
// returned by RabbitMQ and fails with ErrNotDeclared. RabbitMQ does not
// drop duplicates (Features().Dedupe is false).
//
// Consumers of a topic share its queue whatever their group: the queue is
// the group.
//
// # Delivery count, delivery limit and the dead-letter path
//
// A quorum queue counts the times a message went back to it after a failed
// delivery, a reject with requeue or the channel of a consumer that had it
// closing, and sets that count in the x-delivery-count header of the next
// delivery; a delivery's Attempt is that count plus one. Consume settles
// each delivery as package broker says: the handler's nil acknowledges it,
// an error rejects it with requeue (basic.reject rather than basic.nack:
// from RabbitMQ 4.3 on, a nack no longer counts), and a retry.Permanent
// error, or an error at attempt ConsumeOptions.MaxDeliveries, hands it to
// ConsumeOptions.DeadLetter with the handler's error, then acknowledges it.
//
// The delivery limit is RabbitMQ's own guard: a message that went back more
// than Config.DeliveryLimit times (so delivered DeliveryLimit+1 times) is
// moved by RabbitMQ to the topic's dead-letter queue. That is how a message
// that crashes every consumer, which therefore never gets to call
// DeadLetter, is given up on. Consume also consumes the dead-letter queue
// and hands each message there to DeadLetter with reason
// broker.ReasonMaxDeliveries, Attempt DeliveryLimit+1 and a nil error,
// acknowledging it once DeadLetter returns nil (when DeadLetter fails, the
// message is rejected with requeue after a backoff and comes back). Keep
// DeliveryLimit (default 20) at or above MaxDeliveries-1 (default 5), so
// that a handler that merely fails is given up on by Consume, with its last
// error; Consume logs a warning when it is not.
//
// # Connections and reconnecting
//
// A Broker keeps two connections, one to publish and one to consume, so
// that RabbitMQ's flow control on a busy publisher cannot hold up
// acknowledgements. amqp091-go does not reconnect by itself (its Recovery
// option is experimental and not used here): each connection is watched
// with NotifyClose and dialled again with Config.Reconnect's backoff.
// While it is down, Publish waits for it within ctx and
// Config.PublishTimeout and then returns a *broker.PublishError; the
// messages of a batch whose channel closed before their confirm fail with
// ErrNacked, and may or may not have been stored: publish them again with
// the same ids. Consume subscribes again once the connection is back; the
// deliveries it had not acknowledged come back to the queue when the old
// channel closes, with their delivery count raised.
//
// Open dials once and fails if it cannot, unless Config.RetryFirstConnect
// is set: then a server that cannot be reached (not one that refuses the
// credentials) leaves the Broker dialling in the background, and until
// its first connection Declare and Publish fail at once with errors
// wrapping broker.ErrNotConnected. Connected reports the publishing
// connection's state (broker.Connectivity), which an outbox relay reads to
// probe the broker as soon as it is back.
package rabbitmq
