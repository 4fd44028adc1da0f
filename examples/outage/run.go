package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes/outagetest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The restart's steps (the other scenarios' are package outagetest's).
const (
	EventStop     = "stop (pg_ctl stop -m fast)"
	EventStopped  = "server stopped"
	EventStart    = "start (pg_ctl start)"
	EventAccepted = "accepting again"
)

// target is a scenario's database and its fault.
type target struct {
	what string // the database, for the progress lines
	// poolConfig is a config of the pools, extra its "key=value"
	// settings.
	poolConfig func(extra ...string) (*pgxpool.Config, error)
	// committed returns the ids in column id of table on the primary.
	committed func(ctx context.Context, table string) ([]int64, error)
	// fault plays the fault, calling on after each step, and returns its
	// steps, when it began (down) and when the database was back: it
	// accepts again (restart), the endpoint's DNS record moved to the new
	// primary (multiaz), the name moved to it (demoted).
	fault func(ctx context.Context, on func(outagetest.Event)) (events []outagetest.Event, down, back time.Time, err error)
	close func()
}

// start starts the scenario's database.
func start(ctx context.Context, o options, progress io.Writer) (*target, error) {
	switch o.Scenario {
	case MultiAZ:
		fmt.Fprintln(progress, "starting an RDS Multi-AZ DB instance: a primary and a standby that is not readable (PostgreSQL, synchronous replication) ...")
		m, err := outagetest.StartMultiAZ(ctx, outagetest.MultiAZConfig{TTL: o.ClusterTTL()})
		if err != nil {
			return nil, err
		}
		return duoTarget("endpoint", m.Endpoint, m.SingleIP, m, func(ctx context.Context, on func(outagetest.Event)) ([]outagetest.Event, time.Time, time.Time, error) {
			res, err := m.Failover(ctx, outagetest.FailoverScenario{Detect: o.Detect, DNSLag: o.DNSLag, Rejoin: true, OnEvent: on})
			return span(res, err, outagetest.EventSilent, outagetest.EventDNS)
		}), nil
	case Demoted:
		fmt.Fprintln(progress, "starting a primary behind a DNS name and its readable standby (PostgreSQL, synchronous replication) ...")
		p, err := outagetest.StartPair(ctx, outagetest.PairConfig{TTL: o.ClusterTTL()})
		if err != nil {
			return nil, err
		}
		return duoTarget("name", p.Name, p.SingleIP, p, func(ctx context.Context, on func(outagetest.Event)) ([]outagetest.Event, time.Time, time.Time, error) {
			// The fault begins with the fast shutdown, the event comes
			// once it is done.
			began := time.Now()
			res, err := p.Demote(ctx, outagetest.DemoteScenario{NameLag: o.NameLag, OnEvent: on})
			events, _, back, err := span(res, err, outagetest.EventStopped, outagetest.EventDNS)
			return events, began, back, err
		}), nil
	}
	fmt.Fprintln(progress, "starting a PostgreSQL server ...")
	s, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return nil, err
	}
	return &target{
		what: "one server at " + s.Addr(),
		poolConfig: func(extra ...string) (*pgxpool.Config, error) {
			return pgxpool.ParseConfig(strings.Join(append([]string{s.DSN()}, extra...), "&"))
		},
		committed: func(ctx context.Context, table string) ([]int64, error) {
			conn, err := pgx.Connect(ctx, s.DSN())
			if err != nil {
				return nil, err
			}
			defer conn.Close(context.Background())
			rows, _ := conn.Query(ctx, "SELECT id FROM "+table)
			return pgx.CollectRows(rows, pgx.RowTo[int64])
		},
		fault: func(ctx context.Context, on func(outagetest.Event)) ([]outagetest.Event, time.Time, time.Time, error) {
			return restart(ctx, s, o.Down, on)
		},
		close: func() { _ = s.Stop() },
	}, nil
}

// duo is a primary and its standby behind a name: an outagetest.MultiAZ
// or Pair.
type duo interface {
	Primary() string
	Standby() string
	Addr(id string) string
	PoolConfig(host string, extra ...string) (*pgxpool.Config, error)
	CommittedIDs(ctx context.Context, table string) ([]int64, error)
	Close() error
}

// duoTarget is the target of d, reached at host (an endpoint or a name, as
// kind says), and its fault.
func duoTarget(kind, host string, single bool, d duo, fault func(ctx context.Context, on func(outagetest.Event)) ([]outagetest.Event, time.Time, time.Time, error)) *target {
	return &target{
		what: fmt.Sprintf("%s %s (primary %s at %s, standby %s at %s%s)", kind, host,
			d.Primary(), d.Addr(d.Primary()), d.Standby(), d.Addr(d.Standby()), singleIP(single)),
		poolConfig: func(extra ...string) (*pgxpool.Config, error) { return d.PoolConfig(host, extra...) },
		committed:  d.CommittedIDs,
		fault:      fault,
		close:      func() { _ = d.Close() },
	}
}

func singleIP(single bool) string {
	if single {
		return "; single address: every server on 127.0.0.1, a port each"
	}
	return ""
}

// span is an operation's steps, when its first step named down and its
// step named back happened.
func span(res outagetest.Result, err error, down, back string) ([]outagetest.Event, time.Time, time.Time, error) {
	if err != nil {
		return nil, time.Time{}, time.Time{}, err
	}
	d, ok1 := res.At(down)
	b, ok2 := res.At(back)
	if !ok1 || !ok2 {
		return nil, time.Time{}, time.Time{}, fmt.Errorf("the simulator played no %q or no %q: %+v", down, back, res.Events)
	}
	return res.Events, d, b, nil
}

// restart stops s (fast), waits until down after the stop began, starts
// it again, and returns the steps: back is when it accepted a connection
// again (a plain connect every 10 ms from the stop on; pg_ctl start's
// return if that is earlier).
func restart(ctx context.Context, s *pgtest.Server, down time.Duration, on func(outagetest.Event)) ([]outagetest.Event, time.Time, time.Time, error) {
	var events []outagetest.Event
	emit := func(name string, at time.Time) {
		e := outagetest.Event{At: at, Name: name, Server: s.Addr()}
		events = append(events, e)
		on(e)
	}
	began := time.Now()
	emit(EventStop, began)
	if err := s.Shutdown(ctx, pgtest.ShutdownFast); err != nil {
		return nil, began, began, err
	}
	emit(EventStopped, time.Now())
	accepted, stop := watchAccept(ctx, s.DSN())
	defer stop()
	if err := harness.Sleep(ctx, time.Until(began.Add(down))); err != nil {
		return nil, began, began, err
	}
	emit(EventStart, time.Now())
	if err := s.Restart(ctx); err != nil {
		return nil, began, began, err
	}
	back := time.Now()
	if at := accepted(); !at.IsZero() && at.Before(back) {
		back = at
	}
	emit(EventAccepted, back)
	return events, began, back, nil
}

// watchAccept connects to dsn every 10 ms until a connect succeeds or
// stop is called (which waits for the goroutine); wait waits for a
// success (at most 5 s) and returns when it was, zero if none came.
func watchAccept(ctx context.Context, dsn string) (wait func() time.Time, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan time.Time, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer close(done)
		for {
			cctx, ccancel := context.WithTimeout(ctx, time.Second)
			c, err := pgconn.Connect(cctx, dsn)
			ccancel()
			if err == nil {
				done <- time.Now()
				_ = c.Close(context.Background())
				return
			}
			if harness.Sleep(ctx, 10*time.Millisecond) != nil {
				return
			}
		}
	}()
	stop = func() { cancel(); <-exited }
	return func() time.Time {
		select {
		case at := <-done:
			return at
		case <-time.After(5 * time.Second):
			stop()
			return <-done // zero, or a success just before the stop
		}
	}, stop
}

// dialer counts the dials of a pool: its config's DialFunc, which
// pgxpool's connects and holdfast's prober alike dial through.
type dialer struct {
	mu sync.Mutex
	at []time.Time
}

// wrap returns dial, each call counted.
func (c *dialer) wrap(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.mu.Lock()
		c.at = append(c.at, time.Now())
		c.mu.Unlock()
		return dial(ctx, network, addr)
	}
}

// between counts the dials begun in [a, b).
func (c *dialer) between(a, b time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.at {
		if !t.Before(a) && t.Before(b) {
			n++
		}
	}
	return n
}

// count counts every dial so far.
func (c *dialer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at)
}

// logEvents passes holdfast's log on to next and records its "database
// down" and "database back" lines as events.
type logEvents struct {
	next   slog.Handler
	mu     *sync.Mutex
	events *[]outagetest.Event
}

func (h logEvents) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h logEvents) Handle(ctx context.Context, r slog.Record) error {
	if name, ok := strings.CutPrefix(r.Message, "holdfast: "); ok && strings.HasPrefix(name, "database ") {
		h.mu.Lock()
		*h.events = append(*h.events, outagetest.Event{At: r.Time, Name: name})
		h.mu.Unlock()
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h logEvents) WithAttrs(as []slog.Attr) slog.Handler {
	return logEvents{next: h.next.WithAttrs(as), mu: h.mu, events: h.events}
}

func (h logEvents) WithGroup(name string) slog.Handler {
	return logEvents{next: h.next.WithGroup(name), mu: h.mu, events: h.events}
}

// classifier names the errors that carry no SQLSTATE: the built-in rules,
// after holdfast's waits that ended first (a database down, a connect not
// admitted). Not the factory's own: it says Fatal "outcome-unknown" of a
// connection closed under a transaction that the runner knows did not
// commit (it said so, and it was not retried only for lack of time).
var classifier = classify.New(
	classify.Sentinel(holdfast.ErrDatabaseDown, classify.Verdict{Class: classify.Transient, Reason: classify.ReasonDatabaseDown}),
	classify.Sentinel(holdfast.ErrQueued, classify.Verdict{Class: classify.Transient, Reason: classify.ReasonQueued}),
)

// run starts the scenario's database, plays its fault under the workload
// and returns the measurements. progress receives the live lines.
func run(ctx context.Context, o options, progress io.Writer) (*Result, error) {
	if o.Workers < 1 {
		return nil, errors.New("-workers must be at least 1")
	}
	if !slices.Contains(scenarios, o.Scenario) {
		return nil, fmt.Errorf("unknown scenario %q", o.Scenario)
	}
	timeout := o.timeout()
	tgt, err := start(ctx, o, progress)
	if err != nil {
		return nil, err
	}
	defer tgt.close()

	// The holdfast factory: every default (the outage layer on), its log
	// lines "database down" and "database back" recorded.
	var logMu sync.Mutex
	var logged []outagetest.Event
	f, err := holdfast.New(holdfast.WithLogger(slog.New(logEvents{next: o.Logger(nil).Handler(), mu: &logMu, events: &logged})))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dialers := map[string]*dialer{"pgxpool": {}, "holdfast": {}}
	pools, err := harness.OpenPools(ctx, f, false, func(client string) (*pgxpool.Config, error) {
		// Room beyond the connections a fault freezes (multiaz).
		cfg, err := tgt.poolConfig(fmt.Sprintf("pool_max_conns=%d", 2*o.Workers))
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.DialFunc = dialers[client].wrap(cfg.ConnConfig.DialFunc)
		return cfg, nil
	})
	if err != nil {
		return nil, err
	}
	defer pools.Close()

	plain := newClient("pgxpool", &harness.Writer{Acquire: pools.Plain.Acquire,
		Retrier: &retry.Retrier{Policy: harness.RetryPolicy(5, timeout), Classify: classify.Classify}})
	hf := newClient("holdfast", &harness.Writer{F: f, Pool: pools.Holdfast})
	clients := []*harness.Client{plain, hf}
	for _, c := range clients {
		if _, err := pools.Plain.Exec(ctx, fmt.Sprintf(ddl, tables[c.Name])); err != nil {
			return nil, err
		}
	}
	if err := pools.Holdfast.Ping(ctx); err != nil {
		return nil, err
	}
	pace := fmt.Sprintf("one request after the other, %v apart", o.Think)
	if o.Every > 0 {
		pace = fmt.Sprintf("each starting a request every %v", o.Every)
	}
	fmt.Fprintf(progress, "%s; DNS TTL %v; %d workers per pool, %s, each request bounded by %v; scenario %s (%s)\n",
		tgt.what, o.DNSTTL, o.Workers, pace, timeout, o.Scenario, o.timings())

	// The workload and the progress lines.
	var lastEvent atomic.Value
	lastEvent.Store("steady")
	wl := harness.Start(clients, harness.Config{Workers: o.Workers, Think: o.Think, Every: o.Every, Timeout: timeout,
		ErrorKey: func(err error) string { return harness.WriteErrorKey(classifier, err) }})
	begin := wl.Begin
	lastDials := map[string]int{}
	wl.Progress(progress, func(b *strings.Builder, counts []harness.Count) {
		fmt.Fprintf(b, "  %-28s", lastEvent.Load().(string))
		harness.WriteCounts(b, counts)
		b.WriteString(" | dials")
		for _, c := range clients {
			n := dialers[c.Name].count()
			fmt.Fprintf(b, " %s %d", c.Name, n-lastDials[c.Name])
			lastDials[c.Name] = n
		}
	})

	// The fault, after the warmup.
	var events []outagetest.Event
	var down, back time.Time
	stopAt, end, err := wl.Play(ctx, o.Warmup, o.Settle, func() (err error) {
		events, down, back, err = tgt.fault(ctx, func(e outagetest.Event) { lastEvent.Store(e.Name) })
		return err
	})
	if err != nil {
		return nil, err
	}
	logMu.Lock()
	logged = slices.Clone(logged)
	logMu.Unlock()
	res := &Result{Scenario: o.Scenario, Workers: o.Workers, RequestTimeoutMS: ms(timeout), DNSTTLMS: ms(o.DNSTTL),
		OutageMS: ms(back.Sub(down)), BackoffSteps: backoffSteps(back.Sub(down))}
	if err := res.measure(ctx, tgt, clients, dialers, begin, stopAt, down, back, timeout); err != nil {
		return nil, err
	}
	res.timeline(events, logged, down)
	res.goals()
	if o.SVG != "" {
		if err := res.chart(begin, stopAt, end, down, back, events, logged, clients).WriteFile(o.SVG); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "timeline drawn in %s\n", o.SVG)
	}
	return res, nil
}

// timings are the scenario's timings, for the progress lines.
func (o options) timings() string {
	switch o.Scenario {
	case MultiAZ:
		return fmt.Sprintf("detect %v, DNS lag %v", o.Detect, o.DNSLag)
	case Demoted:
		return fmt.Sprintf("the name moves %v after the promotion", o.NameLag)
	}
	return fmt.Sprintf("stopped %v", o.Down)
}
