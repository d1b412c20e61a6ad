package rabbitmq

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

func TestVersionAtLeast(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    string
		want bool
	}{
		{"3.10.8", true},
		{"3.10.0", true},
		{"3.9.29", false},
		{"3.8.0", false},
		{"3.13.7", true},
		{"4.0.5", true},
		{"2.8.7", false},
		{"3.10.0-rc.1", true},
		{"3.9-beta", false},
		{"", true},
		{"unknown", true},
	} {
		if got := versionAtLeast(c.v, 3, 10); got != c.want {
			t.Errorf("versionAtLeast(%q, 3, 10) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestAttemptFromDeliveryCount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		h    amqp.Table
		want int
	}{
		{nil, 1},
		{amqp.Table{}, 1},
		{amqp.Table{"x-delivery-count": int64(0)}, 1},
		{amqp.Table{"x-delivery-count": int64(2)}, 3},
		{amqp.Table{"x-delivery-count": int32(4)}, 5},
		{amqp.Table{"x-delivery-count": int8(1)}, 2},
		{amqp.Table{"x-delivery-count": uint16(6)}, 7},
		{amqp.Table{"x-delivery-count": int64(-1)}, 1},
		{amqp.Table{"x-delivery-count": "7"}, 1},
	} {
		if got := attempt(c.h); got != c.want {
			t.Errorf("attempt(%v) = %d, want %d", c.h, got, c.want)
		}
	}
}

func TestReservedHeaders(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		HeaderKey: true, "x-delivery-count": true, "x-death": true,
		"x-first-death-reason": true, "x-last-death-queue": true,
		"x-request-id": false, "source": false, "X-Death": false,
	} {
		if got := reservedHeader(name); got != want {
			t.Errorf("reservedHeader(%q) = %v, want %v", name, got, want)
		}
	}
}
