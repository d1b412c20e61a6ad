package broker

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestConsumeOptionsDefaultsAndErrors(t *testing.T) {
	dl := func(context.Context, Delivery, string, error) error { return nil }
	o, err := ConsumeOptions{DeadLetter: dl}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Group != DefaultGroup || o.MaxDeliveries != DefaultMaxDeliveries || o.AckWait != DefaultAckWait || o.Prefetch != DefaultPrefetch {
		t.Fatalf("defaults: %+v", o)
	}
	set := ConsumeOptions{Group: "g", MaxDeliveries: 2, AckWait: time.Second, Prefetch: 3, DeadLetter: dl}
	if o, err := set.WithDefaults(); err != nil || o.Group != "g" || o.MaxDeliveries != 2 || o.AckWait != time.Second || o.Prefetch != 3 {
		t.Fatalf("set options: %+v, %v; want them kept", o, err)
	}
	for name, bad := range map[string]ConsumeOptions{
		"MaxDeliveries": {MaxDeliveries: -1, DeadLetter: dl},
		"AckWait":       {AckWait: -time.Second, DeadLetter: dl},
		"Prefetch":      {Prefetch: -1, DeadLetter: dl},
		"DeadLetter":    {},
	} {
		if _, err := bad.WithDefaults(); err == nil || !strings.Contains(err.Error(), "ConsumeOptions."+name) {
			t.Errorf("%s: %v, want an error naming ConsumeOptions.%s", name, err, name)
		}
	}
}
