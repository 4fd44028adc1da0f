package failovertest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A writer crash with the demo's timings, printed as a timeline while a
// plain pool on the cluster endpoint keeps writing. (Not run by go test: it
// takes about 25 s.) A run printed:
//
//	  1.0s  write failed: unexpected EOF
//	  1.1s  writer down                orders-1
//	  3.2s  replica promoted           orders-2
//	  3.2s  topology updated           orders-2
//	 13.2s  DNS moved                  orders-2
//	 13.4s  old writer back as reader  orders-1
//	 13.5s  write failed: ERROR: cannot execute INSERT in a read-only transaction (SQLSTATE 25006)
//	20 writes acknowledged, 112 failed; 20 rows on the new writer
//
// The pool's cached answer (5 s) still named the old writer when it came
// back as a reader; the pool connected there and keeps those connections.
func isReadOnly(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006"
}

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
	go func() {
		time.Sleep(time.Second)
		_, err := c.Failover(ctx, s)
		done <- err
	}()

	// Write until the failover is over and a write went through after it,
	// or for 10 s more: a plain pool that connected to the cluster endpoint
	// while its cached DNS answer still named the old writer, back as a
	// reader by then, keeps those connections, and their writes fail with
	// 25006 until they are closed.
	var acked []int64
	failed, over, readOnly := 0, time.Time{}, false
	for id := int64(1); over.IsZero() || time.Since(over) < 10*time.Second; id++ {
		select {
		case err := <-done:
			if err != nil {
				log.Fatal(err)
			}
			over = time.Now()
		default:
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := pool.Exec(wctx, "INSERT INTO orders VALUES ($1)", id)
		cancel()
		if err != nil {
			if failed++; failed == 1 || isReadOnly(err) && !readOnly {
				fmt.Printf("%5.1fs  write failed: %v\n", time.Since(start).Seconds(), err)
			}
			readOnly = readOnly || isReadOnly(err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		acked = append(acked, id)
		if !over.IsZero() {
			fmt.Printf("%5.1fs  writes again on %s\n", time.Since(start).Seconds(), c.Writer())
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	ids, err := c.CommittedIDs(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d writes acknowledged, %d failed; %d rows on the new writer\n", len(acked), failed, len(ids))
}

// The demo's timings, scaled from Aurora's (detection, then 15–30 s of DNS
// lag in reality).
func ExampleDemoScenario() {
	s := failovertest.DemoScenario(failovertest.Hang)
	fmt.Println(s.Kind, s.Detect, s.DNSLag, s.HangFor, s.Rejoin)
	// Output:
	// hang 2s 10s 15s true
}
