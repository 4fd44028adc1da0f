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

// A failover of a global cluster with data loss, printed as a timeline
// while a plain pool on the global writer endpoint keeps writing. (Not
// run by go test: it takes about 15 s.) A run printed:
//
//	  1.3s  write failed: unexpected EOF
//	  1.4s  Region down              orders-1
//	  3.8s  replica promoted         orders-3
//	  4.0s  topology updated         orders-3
//	  6.8s  DNS moved                orders-3
//	 10.1s  writes again on orders-3 in us-west-2
//	100 writes acknowledged, 86 failed; 41 rows lost (the secondary's rpo_lag_in_msec was 513)
//
// The pool's writes fail from the outage until the global writer
// endpoint moved and its cached answer (5 s) expired; the rows the old
// primary acknowledged in its last half second never reached the
// secondary.
func ExampleGlobal_Failover() {
	ctx := context.Background()
	g, err := failovertest.StartGlobal(ctx, failovertest.GlobalConfig{}) // 500 ms of lag, 5 s of DNS TTL
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	cfg, err := g.PoolConfig(g.GlobalEndpoint, "connect_timeout=2")
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
	s := failovertest.GlobalScenario{Detect: 2 * time.Second, DNSLag: 3 * time.Second, Audit: "orders"}
	s.OnEvent = func(e failovertest.Event) {
		fmt.Printf("%5.1fs  %-24s %s\n", e.At.Sub(start).Seconds(), e.Name, e.Server)
	}
	type outcome struct {
		res failovertest.GlobalResult
		err error
	}
	done := make(chan outcome, 1)

	// Write; after 100 writes the primary Region goes down. Stop once a
	// write went through after the failover, or 10 s after it.
	acked, failed, over := 0, 0, time.Time{}
	var res failovertest.GlobalResult
	for id := int64(1); over.IsZero() || time.Since(over) < 10*time.Second; id++ {
		if id == 100 {
			go func() {
				res, err := g.Failover(ctx, s)
				done <- outcome{res, err}
			}()
		}
		select {
		case o := <-done:
			if o.err != nil {
				log.Fatal(o.err)
			}
			res, over = o.res, time.Now()
		default:
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := pool.Exec(wctx, "INSERT INTO orders VALUES ($1)", id)
		cancel()
		if err != nil {
			if failed++; failed == 1 {
				fmt.Printf("%5.1fs  write failed: %v\n", time.Since(start).Seconds(), err)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		acked++
		if !over.IsZero() {
			fmt.Printf("%5.1fs  writes again on %s in %s\n", time.Since(start).Seconds(), g.Writer(), g.WriterRegion())
			break
		}
		time.Sleep(10 * time.Millisecond) // a write every 10 ms or so
	}
	fmt.Printf("%d writes acknowledged, %d failed; %d rows lost (the secondary's rpo_lag_in_msec was %d)\n",
		acked, failed, len(res.Lost), res.RPOLag.Milliseconds())
}
