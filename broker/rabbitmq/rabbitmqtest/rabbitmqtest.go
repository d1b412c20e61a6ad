// Package rabbitmqtest helps the tests that use a shared RabbitMQ server,
// the machine's: they delete the queues their topics made.
package rabbitmqtest

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/weirhq/weir/broker/rabbitmq"
)

// DeleteQueues deletes, on the server at url, the queue of each topic and
// its dead-letter queue (rabbitmq.DLQSuffix), those that exist,
// reporting a failure with t.Errorf.
func DeleteQueues(t testing.TB, url string, topics ...string) {
	t.Helper()
	if len(topics) == 0 {
		return
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Errorf("delete the test's queues: %v", err)
		return
	}
	defer conn.Close()
	for _, topic := range topics {
		for _, q := range []string{topic, topic + rabbitmq.DLQSuffix} {
			ch, err := conn.Channel()
			if err != nil {
				t.Errorf("delete queue %s: %v", q, err)
				return
			}
			if _, err := ch.QueueDelete(q, false, false, false); err != nil {
				t.Errorf("delete queue %s: %v", q, err)
			}
			ch.Close()
		}
	}
}
