package failovertest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A writer crash with the demo's timings, printed as a timeline while a
// pool on the cluster endpoint keeps writing. (Not run by go test: it takes
// about 15 s.)
func Example() {
	ctx := context.Background()
	c, err := failovertest.Start(ctx, failovertest.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	cfg, err := c.PoolConfig(c.ClusterEndpoint, "connect_timeout=2")
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}

	start := time.Now()
	s := failovertest.DemoScenario(failovertest.Crash)
	s.OnEvent = func(e failovertest.Event) {
		fmt.Printf("%5.1fs  %-26s %s\n", e.At.Sub(start).Seconds(), e.Name, e.Server)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Failover(ctx, s); done <- err }()

	var acked []int64
	for id := int64(1); ; id++ {
		select {
		case err := <-done:
			if err != nil {
				log.Fatal(err)
			}
			ids, err := c.CommittedIDs(ctx, "orders")
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%d writes acknowledged, %d rows on the new writer %s\n", len(acked), len(ids), c.Writer())
			return
		default:
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := pool.Exec(wctx, "INSERT INTO orders VALUES ($1)", id)
		cancel()
		if err != nil {
			fmt.Printf("%5.1fs  write %d: %v\n", time.Since(start).Seconds(), id, err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		acked = append(acked, id)
		time.Sleep(50 * time.Millisecond)
	}
}
