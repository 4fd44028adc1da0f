package drain_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/lb/internal/drain"
)

// A load balancer node has been forced offline; wait until its current
// connections are gone, or give up and abort the deploy.
func ExampleWait() {
	current := []int64{12, 4, 0} // what the load balancer reports, poll by poll
	probe := func(context.Context) (drain.Usage, error) {
		n := current[0]
		current = current[1:]
		return drain.Usage{{What: "current connection", N: n}}, nil
	}
	res, err := drain.Wait(context.Background(), drain.Config{Interval: time.Millisecond, Timeout: time.Minute}, probe)
	fmt.Println(res.Polls, err)

	stuck := func(context.Context) (drain.Usage, error) {
		return drain.Usage{{What: "current connection", N: 1}}, nil
	}
	_, err = drain.Wait(context.Background(), drain.Config{Interval: time.Millisecond, Timeout: 5 * time.Millisecond}, stuck)
	fmt.Println(errors.Is(err, drain.ErrTimeout), err)
	// Output:
	// 3 <nil>
	// true drain: timed out after 5ms: still in use: 1 current connection
}
