package cloudsql_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/fakes/outagetest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

// TestSwitchoverErrorIsTransient: a *SwitchoverError is Transient
// "instance-changed" for the factory With builds, even around a TLS
// verification failure (otherwise Fatal).
func TestSwitchoverErrorIsTransient(t *testing.T) {
	t.Parallel()
	s, err := fake.New(fake.Config{Backend: "127.0.0.1:1"})
	s = gcptest.Started(t, s, err)
	d := gcptest.Dialer(t, s, false, cloudsqlconn.NewDialer)
	f := gcptest.NewFactory(t, &fakes.LogBuffer{}, cloudsql.With(d, "db.example.com"))
	se := &cloudsql.SwitchoverError{Switchover: cloudsql.Switchover{Name: "db.example.com", From: "p:r:a", To: "p:r:b"},
		Err: fmt.Errorf("handshake: %w", errors.New("x509: certificate is not valid for any names"))}
	if v := f.Classify(se); v.Class != classify.Transient || v.Reason != cloudsql.ReasonInstanceChanged {
		t.Errorf("Classify = %v, want Transient %s", v, cloudsql.ReasonInstanceChanged)
	}
	if !strings.Contains(se.Error(), "p:r:a") || !strings.Contains(se.Error(), "p:r:b") {
		t.Errorf("Error() = %q: want both instances named", se.Error())
	}
}

// TestWriteEndpointSwitchover plays an advanced DR switchover behind the
// write endpoint with the real connector's DNS resolver, under a holdfast
// pool dialing the name through cloudsql.With and a plain pool through
// cloudsql.Configure. Holdfast reports the switchover (a typed event and a
// log line naming both instances), its writes wait and go on on the new
// primary within a second of the connector seeing the move, and no
// acknowledged write is lost; the plain pool's writes fail on the demoted
// primary. With the connector's default failover period (30 s), the move
// is seen by the TLS failure of the first dial after it, which holdfast
// explains and retries.
func TestWriteEndpointSwitchover(t *testing.T) {
	t.Parallel()
	for _, period := range []time.Duration{200 * time.Millisecond, 30 * time.Second} {
		t.Run(period.String(), func(t *testing.T) {
			t.Parallel()
			testWriteEndpointSwitchover(t, period)
		})
	}
}

func testWriteEndpointSwitchover(t *testing.T, period time.Duration) {
	pair := outagetest.StartPairTest(t, outagetest.PairConfig{})
	s, err := fake.New(fake.Config{Backend: pair.Addr("pg-1"), DRBackend: pair.Addr("pg-2")})
	s = gcptest.Started(t, s, err)
	ctx := gcptest.CtxFor(t, 2*time.Minute)
	ep := s.WriteEndpoint()
	dialerOpts := []cloudsqlconn.Option{cloudsqlconn.WithDNSResolver(), cloudsqlconn.WithFailoverPeriod(period)}
	dHF := gcptest.Dialer(t, s, false, cloudsqlconn.NewDialer, dialerOpts...)
	dPlain := gcptest.Dialer(t, s, false, cloudsqlconn.NewDialer, dialerOpts...)

	var mu sync.Mutex
	var events []cloudsql.Switchover
	logs := &fakes.LogBuffer{}
	f := gcptest.NewFactory(t, logs, cloudsql.WithWriteEndpoint(dHF, ep, cloudsql.EndpointConfig{
		OnSwitchover: func(s cloudsql.Switchover) { mu.Lock(); events = append(events, s); mu.Unlock() },
		Logger:       slog.New(slog.NewTextHandler(logs, nil)),
	}))
	dsn := pair.DSN("localhost") + "&pool_max_conns=3"
	pool := gcptest.Pool(t, f, gcptest.Parse(t, dsn))
	plainCfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := cloudsql.Configure(plainCfg, dPlain, ep); err != nil {
		t.Fatal(err)
	}
	plain, err := pgxpool.NewWithConfig(ctx, plainCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE acked (id int PRIMARY KEY, port int)"); err != nil {
		t.Fatal(err)
	}
	if err := plain.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	// Writers: holdfast's through the runner, each request bounded by
	// 10 s; the plain pool's, once each. They run until stop.
	var next atomic.Int64
	var acked sync.Map // id → time acknowledged
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var hfFailed, plainFailed atomic.Int32
	write := func(do func(ctx context.Context, id int64) error, failed *atomic.Int32) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := next.Add(1)
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := do(rctx, id)
			cancel()
			if err != nil {
				// A holdfast write cut in flight (its COMMIT's answer
				// lost as the old primary stopped) is reported
				// outcome-unknown, truthfully: only the others count.
				if failed == &hfFailed && f.Classify(err).Reason == classify.ReasonOutcomeUnknown {
					t.Logf("holdfast write %d in flight: %v", id, err)
					continue
				}
				if failed.Add(1); failed == &hfFailed {
					t.Logf("holdfast write %d failed: %v", id, err)
				}
				continue
			}
			acked.Store(id, time.Now())
		}
	}
	insert := "INSERT INTO acked (id, port) VALUES ($1, inet_server_port())"
	wg.Add(3)
	for range 2 {
		go write(func(ctx context.Context, id int64) error {
			return f.RunTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, insert, id); return err })
		}, &hfFailed)
	}
	go write(func(ctx context.Context, id int64) error { _, err := plain.Exec(ctx, insert, id); return err }, &plainFailed)

	sw, err := s.Switchover(ctx, func(ctx context.Context) error {
		_, err := pair.Demote(ctx, outagetest.DemoteScenario{Hold: true})
		return err
	})
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	// Holdfast's writes go on on the new primary: wait for one
	// acknowledged after the move (bounded by ctx).
	var first time.Time
	for first.IsZero() {
		acked.Range(func(_, v any) bool {
			if at := v.(time.Time); at.After(sw.Accepting) && (first.IsZero() || at.Before(first)) {
				first = at
			}
			return true
		})
		if first.IsZero() {
			select {
			case <-ctx.Done():
				close(stop)
				wg.Wait()
				t.Fatal("no write acknowledged after the switchover")
			case <-time.After(20 * time.Millisecond): // a poll of the writers' results
			}
		}
	}
	close(stop)
	wg.Wait()
	resume := first.Sub(sw.Accepting)
	t.Logf("first write acknowledged %v after the name moved (failover period %v); holdfast failed %d, plain failed %d", resume, period, hfFailed.Load(), plainFailed.Load())
	if bound := time.Second + min(period, time.Second); resume > bound {
		t.Errorf("writes resumed %v after the move, want within %v", resume, bound)
	}
	if hfFailed.Load() != 0 {
		t.Errorf("holdfast: %d writes failed", hfFailed.Load())
	}
	if plainFailed.Load() == 0 {
		t.Error("the plain pool's writes never failed: the switchover did not bite")
	}
	mu.Lock()
	got := append([]cloudsql.Switchover(nil), events...)
	mu.Unlock()
	if len(got) == 0 || got[0].From != sw.From || got[0].To != sw.To || got[0].Name != ep {
		t.Errorf("switchover events = %+v, want one from %s to %s for %s", got, sw.From, sw.To, ep)
	}
	if out := logs.String(); !strings.Contains(out, "cloudsql: switchover") || !strings.Contains(out, sw.To) {
		t.Errorf("no switchover line naming %s in the log", sw.To)
	}
	// Every acknowledged write is on the new primary.
	var n int
	ids := []int64{}
	acked.Range(func(k, _ any) bool {
		ids = append(ids, k.(int64))
		return true
	})
	conn, err := pgx.Connect(ctx, "postgres://postgres@"+pair.Addr(pair.Primary())+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM acked WHERE id = ANY($1)", ids).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(ids) {
		t.Errorf("%d of %d acknowledged writes on the new primary", n, len(ids))
	}
}
