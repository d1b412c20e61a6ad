package clock_test

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/clock"
)

// A fake clock moves only when told to, so a minute-long wait is tested at
// once.
func ExampleFake() {
	c := clock.NewFake(time.Date(2026, 1, 21, 2, 0, 0, 0, time.UTC))
	t := c.NewTimer(time.Minute)

	c.Advance(59 * time.Second)
	select {
	case <-t.C():
		fmt.Println("fired early")
	default:
		fmt.Println("still waiting at", c.Now().Format("15:04:05"))
	}

	c.Advance(time.Second)
	fmt.Println("fired at", (<-t.C()).Format("15:04:05"))
	// Output:
	// still waiting at 02:00:59
	// fired at 02:01:00
}
