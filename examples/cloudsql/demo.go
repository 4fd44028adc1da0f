package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/examples/harness"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/fakes/outagetest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/retry"
)

// tables are the clients' tables: each client writes its own.
var tables = map[string]string{"pgxpool": "writes_pgxpool", "holdfast": "writes_holdfast"}

// sim is the fake Cloud SQL of a run and the databases behind it.
type sim struct {
	fake   *fake.Server
	own    map[string]*fake.Server // token503: a fake per client, each failing its first token fetch
	pg     *pgtest.Server          // the instance's PostgreSQL; nil for dr-switchover
	pair   *outagetest.Pair        // the primary and the DR replica's, for dr-switchover
	name   string                  // what the pools dial: the connection name or the write endpoint
	dsn    string                  // user and database
	writer func() string           // the writer's address at the end, for the audit
	close  []func() error          // in order
	iam    bool                    // the dialers use IAM database authentication
	extra  []cloudsqlconn.Option
}

func (s *sim) Close() {
	for _, c := range s.close {
		_ = c()
	}
}

func startSim(ctx context.Context, o options) (*sim, error) {
	s := &sim{dsn: "host=localhost user=postgres dbname=postgres"}
	if o.Scenario == "dr-switchover" {
		pair, err := outagetest.StartPair(ctx, outagetest.PairConfig{})
		if err != nil {
			return nil, err
		}
		s.pair = pair
		s.close = append(s.close, pair.Close)
		s.fake, err = fake.New(fake.Config{Backend: pair.Addr("pg-1"), DRBackend: pair.Addr("pg-2")})
		if err != nil {
			s.Close()
			return nil, err
		}
		s.close = append([]func() error{s.fake.Close}, s.close...)
		s.name = s.fake.WriteEndpoint()
		s.writer = func() string { return pair.Addr(pair.Primary()) }
		s.extra = []cloudsqlconn.Option{cloudsqlconn.WithDNSResolver(), cloudsqlconn.WithFailoverPeriod(o.FailoverPeriod)}
		return s, nil
	}
	// Durable commits (pgtest's default turns them off for speed): the
	// HA standby takes the disk over with every committed row.
	pg, err := pgtest.Start(ctx, pgtest.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		return nil, err
	}
	s.pg = pg
	s.close = append(s.close, pg.Stop)
	s.fake, err = fake.New(fake.Config{Backend: pg.Addr()})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.close = append([]func() error{s.fake.Close}, s.close...)
	s.name = s.fake.ConnName()
	s.writer = pg.Addr
	s.iam = o.Scenario == "token503"
	if s.iam {
		// A fake per client on the same PostgreSQL, so that each
		// dialer's first login token fetch fails, whichever fetches
		// first.
		other, err := fake.New(fake.Config{Backend: pg.Addr()})
		if err != nil {
			s.Close()
			return nil, err
		}
		s.close = append([]func() error{other.Close}, s.close...)
		s.own = map[string]*fake.Server{"pgxpool": other, "holdfast": s.fake}
	}
	return s, nil
}

// dials counts a client's dials of the instance (the connector's TCP
// dials, which the fake's Dial redirects).
type dials struct {
	n, failed, inFlight, peak atomic.Int64
}

// dialer is a real cloudsqlconn dialer pointed at the client's fake, its
// dials counted in n.
func (s *sim) dialer(ctx context.Context, client string, n *dials) (*cloudsqlconn.Dialer, error) {
	f := s.fake
	if s.own != nil {
		f = s.own[client]
	}
	opts, err := f.DialerOptions()
	if s.iam {
		opts, err = f.IAMDialerOptions()
	}
	if err != nil {
		return nil, err
	}
	count := cloudsqlconn.WithDialFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.n.Add(1)
		in := n.inFlight.Add(1)
		for p := n.peak.Load(); in > p && !n.peak.CompareAndSwap(p, in); p = n.peak.Load() {
		}
		c, err := f.Dial(ctx, network, addr)
		n.inFlight.Add(-1)
		if err != nil {
			n.failed.Add(1)
		}
		return c, err
	})
	return cloudsqlconn.NewDialer(ctx, append(append(opts, s.extra...), count)...)
}

// exec runs sql on the writer, directly.
func (s *sim) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, "postgres://postgres@"+s.writer()+"/postgres?sslmode=disable")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// committed is whether an id is in a client's table on the writer.
func (s *sim) committed(ctx context.Context, client string) (func(id int64) bool, error) {
	conn, err := pgx.Connect(ctx, "postgres://postgres@"+s.writer()+"/postgres?sslmode=disable")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT id FROM public."+tables[client])
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return harness.Committed(ids), err
}

// play plays the scenario and returns what the fake did.
func (s *sim) play(ctx context.Context, o options) (fake.Switch, error) {
	switch o.Scenario {
	case "maintenance":
		return s.fake.Maintenance(ctx, o.Cut)
	case "ha-failover":
		return s.fake.Failover(ctx, o.Downtime, func(ctx context.Context) error {
			if err := s.pg.Shutdown(ctx, pgtest.ShutdownImmediate); err != nil {
				return err
			}
			return s.pg.Restart(ctx)
		})
	case "dr-switchover":
		return s.fake.Switchover(ctx, func(ctx context.Context) error {
			_, err := s.pair.Demote(ctx, outagetest.DemoteScenario{Hold: true})
			return err
		})
	}
	return fake.Switch{}, nil // token503: armed before the pools open
}

// newClient is a client of the workload that writes to its own table
// (harness.WriteClient).
func newClient(name string, w *harness.Writer) *harness.Client {
	return harness.WriteClient(name, tables[name], w)
}

// run starts the simulation, plays the scenario under the workload and
// returns the measurements.
func run(ctx context.Context, o options, progress io.Writer) (*Result, error) {
	if o.Workers < 1 {
		return nil, errors.New("-workers must be at least 1")
	}
	fmt.Fprintf(progress, "starting the fake Cloud SQL (scenario %s) with PostgreSQL behind it ...\n", o.Scenario)
	s, err := startSim(ctx, o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for _, t := range tables {
		if err := s.exec(ctx, fmt.Sprintf(harness.WriteDDL, t)); err != nil {
			return nil, err
		}
	}

	// A real dialer per client, the same options.
	counts := map[string]*dials{"pgxpool": {}, "holdfast": {}}
	dPlain, err := s.dialer(ctx, "pgxpool", counts["pgxpool"])
	if err != nil {
		return nil, err
	}
	defer dPlain.Close()
	dHF, err := s.dialer(ctx, "holdfast", counts["holdfast"])
	if err != nil {
		return nil, err
	}
	defer dHF.Close()

	logger := o.Logger(&slog.HandlerOptions{Level: slog.LevelDebug})
	f, err := holdfast.New(cloudsql.With(dHF, s.name), holdfast.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if o.Scenario == "token503" {
		// Each dialer's first IAM login token fetch answers 503.
		for _, f := range s.own {
			f.Fail(fake.LoginToken, 503, 1)
		}
	}
	armed := time.Now()
	poolCfg := func(client string) (*pgxpool.Config, error) {
		cfg, err := pgxpool.ParseConfig(s.dsn + fmt.Sprintf(" pool_max_conns=%d", o.Workers+1))
		if err != nil || client != "pgxpool" {
			return cfg, err
		}
		return cfg, cloudsql.Configure(cfg, dPlain, s.name)
	}
	pools, err := harness.OpenPools(ctx, f, false, poolCfg)
	if err != nil {
		return nil, err
	}
	defer pools.Close()

	plain, hf := &harness.Writer{}, &harness.Writer{}
	plain.Acquire = pools.Plain.Acquire
	policy := harness.RetryPolicy(6, o.RequestTimeout)
	if !o.PlainRetry {
		policy.MaxAttempts = 1
	}
	plain.Retrier = &retry.Retrier{Policy: policy, Classify: classify.Classify}
	hf.Pool, hf.F = pools.Holdfast, f
	clients := []*harness.Client{newClient("pgxpool", plain), newClient("holdfast", hf)}
	fmt.Fprintf(progress, "pools dial %s through cloudsqlconn %s; %d workers per pool\n", s.name, cloudsql.ConnectorVersion, o.Workers)

	// Readiness of the holdfast pool, as a service would serve it.
	checker, err := harness.StartReadiness(ctx, f, pools.Holdfast)
	if err != nil {
		return nil, err
	}
	defer checker.Close()

	var phase atomic.Value
	phase.Store("steady")
	wl := harness.Start(clients, harness.Config{Workers: o.Workers, Think: o.Think, Timeout: o.RequestTimeout,
		ErrorKey: func(err error) string { return errorKey(f, err) }})
	begin := wl.Begin
	wl.Progress(progress, func(b *strings.Builder, counts []harness.Count) {
		fmt.Fprintf(b, "  %-12s", phase.Load().(string))
		harness.WriteCounts(b, counts)
	})

	var rd readinessLog
	wl.Go(func(done <-chan struct{}) { rd.sample(checker, done) })

	var sw fake.Switch
	warmup, play := o.Warmup, func() (err error) {
		phase.Store(o.Scenario)
		sw, err = s.play(ctx, o)
		phase.Store("after")
		return err
	}
	if o.Scenario == "token503" {
		warmup, play = 0, func() error {
			sw = fake.Switch{From: s.name, To: s.name, Cut: armed, Accepting: armed}
			return nil
		}
	}
	stopAt, end, err := wl.Play(ctx, warmup, o.Settle, play)
	if err != nil {
		return nil, err
	}
	res, err := measure(ctx, o, s, sw, begin, stopAt, clients)
	if err != nil {
		return nil, err
	}
	res.Readiness = rd.seenList()
	for i := range res.Clients {
		n := counts[res.Clients[i].Name]
		res.Clients[i].Dials, res.Clients[i].DialsFailed, res.Clients[i].PeakDials = n.n.Load(), n.failed.Load(), n.peak.Load()
	}
	if o.SVG != "" {
		if err := res.chart(begin, stopAt, end, sw, clients).WriteFile(o.SVG); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "timeline drawn in %s\n", o.SVG)
	}
	return res, nil
}

// errorKey names a failed request's error: holdfast's reason when its
// COMMIT's outcome is unknown, else its SQLSTATE, else the factory's class
// and reason (the factory knows the connector's errors).
func errorKey(f *holdfast.Factory, err error) string {
	if errors.Is(err, holdfast.ErrOutcomeUnknown) {
		return classify.ReasonOutcomeUnknown
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return f.Classify(err).String()
}

// readinessLog is what the readiness samples saw.
type readinessLog struct {
	seen map[string]bool // "pass", "warn (database-down)", ...
}

// sample records the checker's answers (harness.SampleReadiness) until
// done is closed.
func (r *readinessLog) sample(c *readiness.Checker, done <-chan struct{}) {
	r.seen = map[string]bool{}
	harness.SampleReadiness(c, done, func(_ readiness.Status, answer string) { r.seen[answer] = true })
}

// seenList is the answers seen, sorted.
func (r *readinessLog) seenList() []string {
	out := []string{}
	for a := range r.seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
