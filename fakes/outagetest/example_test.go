package outagetest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/fakes/outagetest"
)

// ordersPool opens a plain pool, the control, with a PoolConfig's
// result, and creates the table orders through it.
func ordersPool(cfg *pgxpool.Config, err error) *pgxpool.Pool {
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}
	return pool
}

// A DNS-only Multi-AZ failover with the demo's timings, as a timeline,
// while a plain pool on the endpoint writes a row a second, each with a
// deadline of 1 s, until a write goes through after the failover. (Not
// run by go test: it takes about 30 s.) A run printed:
//
//	  0.0s  write 1: ok
//	  1.0s  primary silent               us-east-1a
//	  2.0s  write 2: timeout
//	  4.0s  write 3: timeout
//	  6.0s  write 4: timeout
//	  6.3s  standby promoted             us-east-1b
//	  8.0s  write 5: timeout
//	  …
//	 20.0s  write 11: timeout
//	 21.3s  DNS moved                    us-east-1b
//	 21.8s  old primary back as standby  us-east-1a
//	 22.0s  write 12: timeout
//	 23.1s  write 13: ok
//	rows [1 2 13] on the new primary
//
// Each write hangs until its deadline from the silence until the pool's
// cached answer (a TTL of 5 s) names the new primary. Write 2 was
// committed, and replicated, as the address went silent: its answer was
// lost, not its row. When the old primary's address answers again
// first, as the new standby, the pool's connections there are refused
// with 57P03 until its cached answer moves.
func Example() {
	ctx := context.Background()
	m, err := outagetest.StartMultiAZ(ctx, outagetest.MultiAZConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	pool := ordersPool(m.PoolConfig(m.Endpoint, "connect_timeout=2"))
	defer pool.Close()

	start := time.Now()
	s := outagetest.DemoFailover()
	s.OnEvent = func(e outagetest.Event) {
		fmt.Printf("%5.1fs  %-28s %s\n", e.At.Sub(start).Seconds(), e.Name, e.Server)
	}
	over := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		_, err := m.Failover(ctx, s)
		over <- err
	}()
	failedOver := false
	for id := int64(1); ; id++ {
		select {
		case err := <-over:
			if err != nil {
				log.Fatal(err)
			}
			failedOver = true
		default:
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := pool.Exec(wctx, "INSERT INTO orders VALUES ($1)", id)
		cancel()
		outcome := "ok"
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
			outcome = pe.Code
		} else if err != nil {
			outcome = "timeout"
		}
		fmt.Printf("%5.1fs  write %d: %s\n", time.Since(start).Seconds(), id, outcome)
		if err == nil && failedOver {
			break
		}
		time.Sleep(time.Second - time.Since(start)%time.Second)
	}
	ids, err := m.CommittedIDs(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows", ids, "on the new primary")
}

// A primary behind a DNS name demoted, the name held on it: a plain pool
// that reconnects to the name lands on the demoted server and its
// writes fail with 25006, before and after the name moves, for as long
// as it keeps its connection. (Not run by go test.)
func ExamplePair_Demote() {
	ctx := context.Background()
	p, err := outagetest.StartPair(ctx, outagetest.PairConfig{TTL: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	pool := ordersPool(p.PoolConfig(p.Name, "pool_max_conns=1"))
	defer pool.Close()
	if _, err := p.Demote(ctx, outagetest.DemoteScenario{Hold: true}); err != nil {
		log.Fatal(err)
	}
	write := func() string {
		_, err := pool.Exec(ctx, "INSERT INTO orders VALUES (1)")
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return pe.Code
		}
		return fmt.Sprint(err)
	}
	fmt.Println("after the demote:", write(), write()) // 57P01 (its connection was ended), 25006
	p.MoveName()
	p.Cache.Flush() // as when the pool's cached answer expires
	fmt.Println("after the name moved:", write())
	// after the demote: 57P01 25006
	// after the name moved: 25006
}

// A paused Serverless instance: the first request of a new pool waits
// for the resume. (Not run by go test.)
func ExampleServerless() {
	ctx := context.Background()
	s, err := outagetest.StartServerless(ctx, outagetest.ServerlessConfig{AutoPause: time.Second, Resume: 3 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for !s.Paused() {
		<-s.Changed() // no connection: it pauses after a second
	}
	cfg, err := s.PoolConfig(s.Endpoint)
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	began := time.Now()
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("first request after %.0fs; pauses %d, resumes %d\n", time.Since(began).Seconds(), s.Pauses(), s.Resumes())
	// first request after 3s; pauses 1, resumes 1
}

// The demo's timings, scaled from RDS's: the record moves 20 s after the
// failure (RDS: 60 to 120 s).
func ExampleDemoFailover() {
	s := outagetest.DemoFailover()
	fmt.Println(s.Detect, s.DNSLag, s.Rejoin)
	// Output:
	// 5s 15s true
}
