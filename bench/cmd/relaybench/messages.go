package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// minBodySize is the smallest -size: the JSON object without padding.
const minBodySize = len(`{"seq":1234567890,"pad":""}`)

// message is the i-th message of a run, the same on both sides: a JSON
// body of s.size bytes, and a key when -keys is set.
type message struct {
	key  string
	body []byte
}

// messages returns the run's n messages.
func messages(s settings) []message {
	out := make([]message, s.n)
	for i := range out {
		head := fmt.Sprintf(`{"seq":%d,"pad":"`, i)
		body := head + strings.Repeat("x", max(0, s.size-len(head)-2)) + `"}`
		out[i].body = []byte(body)
		if s.keys > 0 {
			out[i].key = fmt.Sprintf("key-%d", i%s.keys)
		}
	}
	return out
}

// topicName returns a fresh name for a run's queue or stream subject:
// letters, digits and '_' only, so that it is a valid RabbitMQ queue name,
// NATS subject and JetStream stream name as it is.
func topicName(side string) string {
	return fmt.Sprintf("relaybench_%s_%08x", side, rand.Uint32())
}
