package defaults

import (
	"cmp"
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	d, n := time.Duration(0), 0
	if err := cmp.Or(Set("Config.Wait", &d, time.Second), Set("Config.Count", &n, 5)); err != nil || d != time.Second || n != 5 {
		t.Fatalf("zero fields: %v, %v, %d; want their defaults", err, d, n)
	}
	d, n = 3*time.Second, 7
	if err := cmp.Or(Set("Config.Wait", &d, time.Second), Set("Config.Count", &n, 5)); err != nil || d != 3*time.Second || n != 7 {
		t.Fatalf("set fields: %v, %v, %d; want them kept", err, d, n)
	}
	d, n = -time.Millisecond, -2
	err := cmp.Or(Set("Config.Wait", &d, time.Second), Set("Config.Count", &n, 5))
	if err == nil || err.Error() != "Config.Wait -1ms is negative" {
		t.Fatalf("negative fields: %v; want the first named, with its value", err)
	}
	if err := Set("Config.Count", &n, 5); err == nil || err.Error() != "Config.Count -2 is negative" {
		t.Fatalf("a negative count: %v", err)
	}
}
