// Command failover plays an Aurora (or RDS Multi-AZ DB cluster) writer
// failover on this machine and runs the same write workload through a plain
// pgxpool and through a holdfast pool, side by side.
//
// It starts a simulated cluster (package fakes/failovertest): a writer and
// a replica, real PostgreSQL servers on 127.0.0.11 and 127.0.0.21 (or two
// ports of 127.0.0.1 where those cannot be bound), kept in step by physical
// synchronous replication, so that a write acknowledged by the writer
// survives its death, as Aurora's shared storage guarantees. The cluster's
// names are RDS's, in a fake DNS read through a client-side cache with a
// TTL. Both pools connect by the cluster (writer) endpoint, with the same
// config. N workers per pool run short write transactions (insert a row
// with a unique id, read it back with the address of the server that
// answered, commit), each request bounded. The plain client retries the
// whole transaction with the loop an application writes by hand (made
// idempotent with ON CONFLICT DO NOTHING); the holdfast clients run it
// with holdfast's transaction runner, with a plain INSERT: the runner
// re-runs only what did not commit, and a transaction applied twice would
// fail with 23505 and show in the table.
//
// After a short steady state the simulator plays the failover:
//
//   - crash: the writer dies (pg_ctl stop -m immediate): connections reset,
//     new ones refused.
//   - graceful: the writer shuts down cleanly: its sessions get 57P01.
//   - hang: the writer is frozen (SIGSTOP): its connections go silent and
//     new ones hang after the TCP handshake, until it is resumed and fenced
//     after -hang-for.
//   - failback: a graceful failover, then a second one back to the first
//     writer.
//
// In each, the replica is promoted -detect after the writer went down, the
// cluster endpoint moves to it -dns-lag later (clients see it up to their
// DNS cache's TTL later still), and the old writer comes back as a reader
// (a fresh standby of the new writer), where writes fail with 25006. The
// workload runs until that is done, plus -settle: a plain pool whose cached
// DNS answer still named the old writer when it came back connects there
// and keeps those connections, so its writes keep failing with 25006.
//
// The holdfast client is holdfast.New(holdfast.WithFailover(failover.Config{}))
// with every default, its transactions through Factory.BeginTxFunc. Its monitor notices the dead writer within
// about a second, holds new connections by the writer endpoint until the
// new writer is known, then sends them to it while the DNS lags, refuses
// connections that land on a reader, and cuts its connections to the old
// writer. The plain client is pgxpool with the same config and a
// retry.Retrier classified by classify.Classify. A readiness.Checker on the
// holdfast pool is sampled every 100 ms: it must answer warn (reason
// "failover"), never fail, while the cluster fails over.
//
// With -sql a third client, "database/sql", runs the same workload through
// a *sql.DB of package sqldb over its own holdfast pool from the same
// factory (the same failover monitor), its transactions through
// sqldb.BeginTxFunc. It writes its own table, is
// audited like the others, and is checked against holdfast's goals.
//
// It prints a progress line per second (elapsed time, the simulator's last
// event, holdfast's routing, requests that succeeded and failed per client
// in that second), the merged timeline (the simulator's steps and the
// holdfast monitor's events, in ms from the writer going down), and a
// table per client: requests, failed requests by SQLSTATE or error class,
// acknowledged writes, lost and misplaced writes, the longest pause in
// acknowledged writes, the time to resume writing after the promotion,
// the readiness values seen, the goals, and a legend that defines each
// figure. With -json it prints the same result as one JSON object (progress
// on stderr). With -svg FILE it also draws the run into FILE (package
// examples/timeline): the requests that finished in each 100 ms per client,
// ok and failed apart, the failover's phases and events, each client's
// longest pause.
//
// Run it with: go run ./examples/failover
// Other scenarios: -scenario graceful | hang | failback; -engine multi-az
// for an RDS Multi-AZ DB cluster's topology (rds_tools.show_topology());
// -sql adds the database/sql client.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/timeline"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// options are the command's flags.
type options struct {
	Scenario failovertest.Kind
	Workers  int
	Think    time.Duration // pause between a worker's requests
	Warmup   time.Duration // workload before the failover starts
	Settle   time.Duration // workload after the failover is done
	// Detect, DNSLag and HangFor are the simulator's timings
	// (failovertest.Scenario).
	Detect, DNSLag, HangFor time.Duration
	DNSTTL                  time.Duration // client-side DNS cache TTL (0: no cache)
	Engine                  failovertest.Engine
	RequestTimeout          time.Duration // bounds each request, retries included
	JSON                    bool
	Verbose                 bool   // holdfast's logs on stderr
	SQL                     bool   // a third client: database/sql (package sqldb) over a holdfast pool
	Name                    string // cluster name
	SVG                     string // a file to draw the run into (package examples/timeline); "" for none
}

func defaultOptions() options {
	s := failovertest.DemoScenario(failovertest.Crash)
	return options{
		Scenario:       failovertest.Crash,
		Workers:        4,
		Think:          10 * time.Millisecond,
		Warmup:         2 * time.Second,
		Settle:         5 * time.Second,
		Detect:         s.Detect,
		DNSLag:         s.DNSLag,
		HangFor:        s.HangFor,
		DNSTTL:         failovertest.DefaultTTL,
		Engine:         failovertest.Aurora,
		RequestTimeout: 15 * time.Second,
		Name:           failovertest.DefaultName,
	}
}

func main() { os.Exit(cmd(os.Args[1:], os.Stdout, os.Stderr)) }

// cmd runs the command and returns its exit code.
func cmd(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // parseFlags has printed the error
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	progress := stdout
	if o.JSON {
		progress = stderr
	}
	res, err := run(ctx, o, progress)
	if err != nil {
		fmt.Fprintln(stderr, "failover:", err)
		return 1
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintln(stderr, "failover:", err)
			return 1
		}
		return 0
	}
	res.print(stdout)
	return 0
}

// parseFlags parses the command line into options; usage and errors go to
// errOut.
func parseFlags(args []string, errOut io.Writer) (options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	fs.SetOutput(errOut)
	scenario := fs.String("scenario", string(o.Scenario), "crash | graceful | hang | failback")
	fs.IntVar(&o.Workers, "workers", o.Workers, "concurrent workers per pool")
	fs.DurationVar(&o.Think, "think", o.Think, "pause between a worker's requests")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "workload before the failover starts")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "workload after the failover is done (the old writer back as a reader)")
	fs.DurationVar(&o.Detect, "detect", o.Detect, "from the writer going down to the promotion of the replica")
	fs.DurationVar(&o.DNSLag, "dns-lag", o.DNSLag, "from the promotion to the cluster endpoint moving to the new writer")
	fs.DurationVar(&o.HangFor, "hang-for", o.HangFor, "hang: how long the old writer stays frozen before it is resumed and fenced")
	fs.DurationVar(&o.DNSTTL, "dns-ttl", o.DNSTTL, "client-side DNS cache TTL (0: no cache)")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "bound of each request, retries included")
	engine := fs.String("engine", string(o.Engine), "aurora (aurora_replica_status()) | multi-az (RDS Multi-AZ DB cluster: rds_tools.show_topology())")
	fs.BoolVar(&o.JSON, "json", false, "print the result as one JSON object (progress goes to stderr)")
	fs.BoolVar(&o.Verbose, "v", false, "print holdfast's logs on stderr")
	fs.BoolVar(&o.SQL, "sql", false, "add a third client: database/sql (package sqldb) over a holdfast pool")
	fs.StringVar(&o.SVG, "svg", "", "draw the run into this SVG `file`: requests per 100 ms per client, ok and failed, the failover's events, each client's longest pause")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	fail := func(format string, a ...any) (options, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintln(errOut, "failover:", err)
		return o, err
	}
	o.Scenario = failovertest.Kind(*scenario)
	if !slices.Contains(failovertest.Kinds(), o.Scenario) {
		return fail("unknown -scenario %q", *scenario)
	}
	o.Engine = failovertest.Engine(*engine)
	if o.Engine != failovertest.Aurora && o.Engine != failovertest.MultiAZ {
		return fail("unknown -engine %q", *engine)
	}
	if o.Workers < 1 {
		return fail("-workers %d: must be at least 1", o.Workers)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"think", o.Think}, {"warmup", o.Warmup}, {"settle", o.Settle}, {"detect", o.Detect}, {"dns-lag", o.DNSLag},
		{"hang-for", o.HangFor}, {"dns-ttl", o.DNSTTL}} {
		if d.v < 0 {
			return fail("-%s %v: must not be negative", d.name, d.v)
		}
	}
	if o.RequestTimeout <= 0 {
		return fail("-request-timeout %v: must be positive", o.RequestTimeout)
	}
	return o, nil
}

// Result is what the command measured; its JSON form is the -json output.
type Result struct {
	Scenario  failovertest.Kind   `json:"scenario"`
	Workers   int                 `json:"workers"`
	Engine    failovertest.Engine `json:"engine"`
	DetectMS  float64             `json:"detect_ms"`
	DNSLagMS  float64             `json:"dns_lag_ms"`
	HangForMS float64             `json:"hang_for_ms,omitempty"`
	DNSTTLMS  float64             `json:"dns_ttl_ms"`
	OldWriter string              `json:"old_writer"`
	NewWriter string              `json:"new_writer"` // the writer at the end (the first one again after a failback)
	// Clients are pgxpool, then holdfast, then (with -sql) database/sql.
	Clients []ClientResult `json:"clients"`
	// Timeline merges the simulator's steps, the holdfast monitor's
	// events and the readiness changes, in ms from the writer going down.
	Timeline []TimelineEvent `json:"timeline"`
	// Readiness is the set of health values the holdfast pool's
	// readiness.Checker answered ("pass", "warn", "fail"), in that order;
	// ReadinessReasons, the reasons of the answers that were not pass.
	Readiness        []string `json:"readiness"`
	ReadinessReasons []string `json:"readiness_reasons"`
	// Monitor is the holdfast monitor's status at the end.
	Monitor MonitorResult `json:"monitor"`
	Goals   Goals         `json:"goals"`
}

// ClientResult is one client's figures.
type ClientResult struct {
	Name     string `json:"name"` // "pgxpool", "holdfast" or "database/sql"
	Requests int    `json:"requests"`
	OK       int    `json:"ok"`
	Failed   int    `json:"failed"`
	// Retries counts the runs of transactions after their first, by the
	// workload's own retry (the table's "application retries"): the
	// plain client's hand-written loop, the holdfast clients' runner.
	Retries int `json:"retries"`
	// Runner: its transactions ran through holdfast's runner, and
	// OutcomeUnknown counts its requests whose COMMIT was sent and its
	// answer lost (holdfast.ErrOutcomeUnknown), each then resolved by
	// looking its id up on the writer (client.resolve).
	Runner         bool `json:"runner"`
	OutcomeUnknown int  `json:"outcome_unknown"`
	// Acknowledged counts the requests whose COMMIT succeeded.
	Acknowledged int `json:"acknowledged_writes"`
	// LostWrites: acknowledged ids missing on the writer at the end.
	LostWrites int `json:"lost_writes"`
	// MisplacedWrites: acknowledged writes whose transaction was answered
	// by a server that was not the cluster's writer at any time during
	// the request (a split brain).
	MisplacedWrites int `json:"misplaced_writes"`
	// CommittedUnacknowledged: rows on the writer whose request failed
	// (an ambiguous COMMIT: applied, but the answer was lost). Not an
	// error: the request's caller was told it failed, and a retry of the
	// idempotent transaction would find the row.
	CommittedUnacknowledged int `json:"committed_unacknowledged"`
	// MaxPauseMS is the longest time without an acknowledged write.
	MaxPauseMS float64 `json:"max_pause_ms"`
	// ResumeMS is the time from the promotion of the new writer to the
	// first acknowledgement of a write that started after it (the longest
	// of these over the promotions of a failback); null when the client
	// never wrote again before the next fault or the end of the run.
	// ResumeEachMS lists it per promotion.
	ResumeMS     *float64   `json:"resume_ms"`
	ResumeEachMS []*float64 `json:"resume_each_ms"`
	// SlowestMS is the slowest single request, retries included.
	SlowestMS float64        `json:"slowest_request_ms"`
	Errors    map[string]int `json:"errors"` // SQLSTATE, or class/reason
}

// TimelineEvent is one event and its offset from the writer going down.
type TimelineEvent struct {
	Source   string  `json:"source"` // "simulator", "holdfast" or "readiness"
	Event    string  `json:"event"`
	Server   string  `json:"server,omitempty"`
	OffsetMS float64 `json:"offset_ms"`

	at time.Time
}

// MonitorResult is the holdfast monitor's status at the end of the run.
type MonitorResult struct {
	Writer          string `json:"writer"`
	Routing         string `json:"routing"`
	Failovers       int    `json:"failovers"`
	Held            int    `json:"held"`
	MonitorConnects int    `json:"monitor_connects"`
}

// Goals are the targets of holdfast's failover routing, checked on this
// run.
type Goals struct {
	// ResumeWithin1500ms: holdfast wrote again within 1.5 s of each
	// promotion.
	ResumeWithin1500ms bool `json:"resume_within_1500ms"`
	// PauseRatio is holdfast's longest pause over plain pgxpool's.
	PauseRatio       float64 `json:"pause_ratio"`
	PauseAtMost20pct bool    `json:"pause_at_most_20pct"`
	// NoLostWrites: neither client lost an acknowledged write.
	NoLostWrites bool `json:"no_lost_writes"`
	// ReadinessNeverFailed: the holdfast pool's readiness never answered
	// fail.
	ReadinessNeverFailed bool `json:"readiness_never_failed"`
	// DatabaseSQL checks the database/sql client (-sql) against the same
	// targets; absent without -sql.
	DatabaseSQL *SQLGoals `json:"database_sql,omitempty"`
}

// SQLGoals are holdfast's goals checked on the database/sql client.
type SQLGoals struct {
	// Met: all of the below.
	Met bool `json:"met"`
	// ResumeWithin1500ms: it wrote again within 1.5 s of each promotion.
	ResumeWithin1500ms bool `json:"resume_within_1500ms"`
	// PauseRatio is its longest pause over plain pgxpool's.
	PauseRatio       float64 `json:"pause_ratio"`
	PauseAtMost20pct bool    `json:"pause_at_most_20pct"`
	// NoLostWrites: no acknowledged write lost or misplaced.
	NoLostWrites bool `json:"no_lost_writes"`
	// NoFailedRequests: every request succeeded, after the retry.
	NoFailedRequests bool `json:"no_failed_requests"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// client is one pool under the workload.
type client struct {
	name    string
	table   string
	acquire func(context.Context) (*pgxpool.Conn, error) // the plain client's
	pool    *pgxpool.Pool                                // the holdfast client's
	db      *sql.DB                                      // the database/sql client: requests go through it instead
	f       *holdfast.Factory                            // the holdfast clients: transactions through f's runner
	retrier *retry.Retrier                               // the plain client: its hand-written retry loop

	ids        atomic.Int64
	ok, failed atomic.Int64
	recs       [][]record // per worker
}

// record is one request.
type record struct {
	id         int64
	start, end time.Time
	err        string // "" when it succeeded
	server     string // "ip:port" of the server that answered the last run's read-back
	attempts   int    // runs of the transaction
	unknown    bool   // its error is holdfast.ErrOutcomeUnknown
}

// ddl creates a client's table. Each client writes its own table, so that
// the audit is per client.
const ddl = `CREATE TABLE IF NOT EXISTS public.%s (
	id     bigint PRIMARY KEY,
	worker integer NOT NULL,
	at     timestamptz NOT NULL DEFAULT now()
)`

// classifier names errors that carry no SQLSTATE (holdfast's failover
// errors among them, and database/sql's driver.ErrBadConn).
var classifier = classify.New(failover.Rule, sqldb.Rule)

// errorKey is the SQLSTATE of err, else its class and reason.
func errorKey(err error) string {
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, holdfast.ErrOutcomeUnknown):
		return holdfast.ReasonOutcomeUnknown
	case errors.As(err, &pe):
		return pe.Code
	}
	return classifier.Classify(err).String()
}

// request runs one transaction: insert id, read it back with the address
// of the server answering, commit; runs counts the runs. The holdfast
// clients run it with the factory's transaction runner, the plain client
// with its retry loop.
func (c *client) request(ctx context.Context, id int64, worker int, server *string, runs *int) error {
	switch {
	case c.f != nil && c.db != nil:
		return sqldb.BeginTxFunc(ctx, c.f, c.db, nil, func(tx *sql.Tx) error {
			*runs++
			return c.sqlWork(ctx, tx, id, worker, server)
		})
	case c.f != nil:
		return c.f.BeginTxFunc(ctx, c.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			*runs++
			return c.work(ctx, tx, id, worker, server)
		})
	}
	return c.retrier.Do(ctx, func(ctx context.Context) error {
		*runs++
		conn, err := c.acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return c.work(ctx, tx, id, worker, server) })
	})
}

// insert is the transaction's write: a plain INSERT for the holdfast
// clients, whose runner never applies a transaction twice (a second
// apply would fail: 23505), and INSERT … ON CONFLICT DO NOTHING for the
// plain client, whose retry loop re-runs a COMMIT whose answer was lost.
func (c *client) insert() string {
	if c.f != nil {
		return "INSERT INTO public." + c.table + " (id, worker) VALUES ($1, $2)"
	}
	return "INSERT INTO public." + c.table + " (id, worker) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING"
}

// readBack reads the row back with the server's own address: which
// instance answered (and, at COMMIT, acknowledged) the transaction.
func (c *client) readBack() string {
	return "SELECT host(inet_server_addr()) || ':' || inet_server_port() FROM public." + c.table + " WHERE id = $1"
}

// work is the transaction's work on tx.
func (c *client) work(ctx context.Context, tx pgx.Tx, id int64, worker int, server *string) error {
	if _, err := tx.Exec(ctx, c.insert(), id, worker); err != nil {
		return err
	}
	return tx.QueryRow(ctx, c.readBack(), id).Scan(server)
}

// sqlWork is work through database/sql.
func (c *client) sqlWork(ctx context.Context, tx *sql.Tx, id int64, worker int, server *string) error {
	if _, err := tx.ExecContext(ctx, c.insert(), id, worker); err != nil {
		return err
	}
	return tx.QueryRowContext(ctx, c.readBack(), id).Scan(server)
}

// resolve settles a request whose COMMIT's outcome is unknown
// (holdfast.ErrOutcomeUnknown) as an application with an idempotency key
// does: it looks the key up on the writer, in a new transaction through
// the runner; found, the request is done; absent, the transaction did not
// commit, and it runs again (a plain INSERT: had it committed, the new
// run would fail with 23505, not apply twice).
func (c *client) resolve(ctx context.Context, id int64, worker int, server *string, runs *int) error {
	const lookup = "SELECT EXISTS (SELECT 1 FROM public.%s WHERE id = $1), host(inet_server_addr()) || ':' || inet_server_port()"
	q := fmt.Sprintf(lookup, c.table)
	var found bool
	var err error
	if c.db != nil {
		err = sqldb.BeginTxFunc(ctx, c.f, c.db, nil, func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, q, id).Scan(&found, server)
		})
	} else {
		err = c.f.BeginTxFunc(ctx, c.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, q, id).Scan(&found, server)
		})
	}
	switch {
	case err != nil:
		return err
	case found:
		return nil
	}
	return c.request(ctx, id, worker, server, runs)
}

// loop runs requests until stop is closed.
func (c *client) loop(worker int, stop <-chan struct{}, think, timeout time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		id := c.ids.Add(1)
		start := time.Now()
		// Each request is bounded; the stop signal never cancels one midway.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		runs := 0
		var server string
		err := c.request(ctx, id, worker, &server, &runs)
		unknown := errors.Is(err, holdfast.ErrOutcomeUnknown)
		if unknown {
			err = c.resolve(ctx, id, worker, &server, &runs)
		}
		cancel()
		r := record{id: id, start: start, end: time.Now(), attempts: runs, unknown: unknown}
		if err != nil {
			r.err = errorKey(err)
			c.failed.Add(1)
		} else {
			r.server = server
			c.ok.Add(1)
		}
		c.recs[worker] = append(c.recs[worker], r)
		t.Reset(think)
	}
}

// requestPolicy is the retry around each transaction, the same for every
// client: a handful of attempts, each bounded by the default
// AttemptTimeout (3 s), within the request's bound.
func requestPolicy(timeout time.Duration) retry.Policy {
	p := retry.Default()
	p.MaxAttempts = 6
	p.InitialInterval = 50 * time.Millisecond
	p.MaxElapsed = timeout
	return p
}

// run starts a cluster, plays the failover under the workload and returns
// the measurements. progress receives the live lines.
func run(ctx context.Context, o options, progress io.Writer) (*Result, error) {
	if o.Workers < 1 {
		return nil, errors.New("-workers must be at least 1")
	}
	if !slices.Contains(failovertest.Kinds(), o.Scenario) {
		return nil, fmt.Errorf("unknown scenario %q", o.Scenario)
	}
	if o.Engine == "" {
		o.Engine = failovertest.Aurora
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = defaultOptions().RequestTimeout
	}
	ttl := o.DNSTTL
	if ttl == 0 {
		ttl = -1 // no cache
	}
	fmt.Fprintf(progress, "starting cluster %q (engine %s): a writer and a replica (PostgreSQL, synchronous physical replication) ...\n", o.Name, o.Engine)
	c, err := failovertest.Start(ctx, failovertest.Config{Name: o.Name, TTL: ttl, Engine: o.Engine})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	oldWriter := c.Writer()
	if c.SingleIP {
		fmt.Fprintf(progress, "mode: single address: the servers listen on 127.0.0.1, each on its own port (%s)\n", serverList(c))
	} else {
		fmt.Fprintf(progress, "mode: two addresses (%s)\n", serverList(c))
	}

	clients := []*client{{name: "pgxpool", table: "writes_pgxpool"}, {name: "holdfast", table: "writes_holdfast"}}
	if o.SQL {
		clients = append(clients, &client{name: "database/sql", table: "writes_sql"})
	}
	if err := createTables(ctx, c, clients); err != nil {
		return nil, err
	}
	// The same config for both pools: the cluster endpoint through the
	// client-side DNS cache, one connection per worker and one for the
	// readiness checks.
	poolCfg := func() (*pgxpool.Config, error) {
		return c.PoolConfig(c.ClusterEndpoint, fmt.Sprintf("pool_max_conns=%d", o.Workers+1))
	}

	// The plain pool.
	cfg, err := poolCfg()
	if err != nil {
		return nil, err
	}
	plainPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer plainPool.Close()
	if err := plainPool.Ping(ctx); err != nil {
		return nil, err
	}
	// The same caller-side retry as the holdfast client (the transaction is
	// idempotent), classified by the built-in rules: the comparison is
	// about routing, not about who retries.
	plain := clients[0]
	plain.acquire = plainPool.Acquire
	plain.retrier = &retry.Retrier{Policy: requestPolicy(o.RequestTimeout), Classify: classify.Classify}

	// The holdfast pool: failover routing with every default.
	logOut := io.Discard
	if o.Verbose {
		logOut = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{Logger: logger}), holdfast.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if cfg, err = poolCfg(); err != nil {
		return nil, err
	}
	hfPool, err := f.NewPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer hfPool.Close()
	mon := f.Failover(hfPool)
	if mon == nil {
		return nil, errors.New("holdfast installed no failover monitor on the pool")
	}
	hf := clients[1]
	hf.pool, hf.f = hfPool, f
	if o.SQL {
		// database/sql over its own holdfast pool (same factory, so the
		// same failover monitor), its transactions through
		// sqldb.BeginTxFunc.
		if cfg, err = poolCfg(); err != nil {
			return nil, err
		}
		db, err := sqldb.Open(ctx, f, cfg)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		sc := clients[2]
		sc.db, sc.f = db, f
	}
	if err := waitWriter(ctx, mon); err != nil {
		return nil, fmt.Errorf("holdfast's monitor did not learn the writer: %w", err)
	}

	// Readiness of the holdfast pool, as a service would serve it.
	checker, err := readiness.New(hfPool, readiness.Config{Factory: f})
	if err != nil {
		return nil, err
	}
	defer checker.Close()
	if err := checker.Start(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "cluster endpoint %s, writer %s; DNS TTL %v; %d workers per pool; scenario %s (detect %v, DNS lag %v%s)\n",
		c.ClusterEndpoint, oldWriter, o.DNSTTL, o.Workers, o.Scenario, o.Detect, o.DNSLag, hangNote(o))
	if o.SQL {
		fmt.Fprintln(progress, "clients: pgxpool, holdfast, database/sql (package sqldb over a holdfast pool of the same factory)")
	}

	// The workload, the progress lines and the readiness samples.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	begin := time.Now()
	for _, cl := range clients {
		cl.recs = make([][]record, o.Workers)
		for w := range o.Workers {
			wg.Go(func() { cl.loop(w, stop, o.Think, o.RequestTimeout) })
		}
	}
	var lastEvent atomic.Value
	lastEvent.Store("steady")
	samplesDone := make(chan struct{})
	var swg sync.WaitGroup
	var rd readinessLog
	swg.Go(func() { printProgress(progress, begin, clients, mon, &lastEvent, samplesDone) })
	swg.Go(func() { rd.sample(checker, samplesDone) })
	var stopAt time.Time
	stopAll := func() {
		close(stop)
		stopAt = time.Now()
		wg.Wait()
		close(samplesDone)
		swg.Wait()
	}

	// The failover, after the warmup.
	var fres failovertest.Result
	err = sleepCtx(ctx, o.Warmup)
	if err == nil {
		s := failovertest.Scenario{Kind: o.Scenario, Detect: o.Detect, DNSLag: o.DNSLag, HangFor: o.HangFor, Rejoin: true,
			OnEvent: func(e failovertest.Event) { lastEvent.Store(e.Name) }}
		fres, err = c.Failover(ctx, s)
	}
	if err == nil {
		err = sleepCtx(ctx, o.Settle)
	}
	stopAll()
	end := time.Now()
	if err != nil {
		return nil, err
	}
	res := &Result{Scenario: o.Scenario, Workers: o.Workers, Engine: o.Engine, DetectMS: ms(o.Detect), DNSLagMS: ms(o.DNSLag),
		DNSTTLMS: ms(o.DNSTTL), OldWriter: oldWriter, NewWriter: c.Writer()}
	if o.Scenario == failovertest.Hang {
		res.HangForMS = ms(o.HangFor)
	}
	if err := measure(ctx, res, c, fres, begin, stopAt, clients); err != nil {
		return nil, err
	}
	res.readiness(&rd)
	res.monitor(mon)
	res.timeline(fres, mon, &rd)
	res.goals()
	if o.SVG != "" {
		if err := res.chart(begin, stopAt, end, fres, mon, clients).WriteFile(o.SVG); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "timeline drawn in %s\n", o.SVG)
	}
	return res, nil
}

// chart is the run as a timeline (package examples/timeline), from begin
// to end: each client's requests by the time they finished, its longest
// time without an acknowledged write (up to stopAt, as in the table) as
// its longest pause, the failover's steps as phases and marks.
func (r *Result) chart(begin, stopAt, end time.Time, fres failovertest.Result, m failover.Monitor, clients []*client) timeline.Chart {
	c := timeline.Chart{
		Title:  fmt.Sprintf("Writer failover (scenario %s, %s): plain pgxpool vs holdfast, %d workers each", r.Scenario, r.Engine, r.Workers),
		Length: end.Sub(begin),
	}
	var counts []string
	for i, cl := range clients {
		s := timeline.Series{Name: cl.name}
		var acks []time.Time
		for _, recs := range cl.recs {
			for _, rec := range recs {
				s.Requests = append(s.Requests, timeline.Request{End: rec.end.Sub(begin), OK: rec.err == ""})
				if rec.err == "" {
					acks = append(acks, rec.end)
				}
			}
		}
		from, to := longestGapSpan(begin, stopAt, acks)
		s.Pause = &timeline.Span{From: from.Sub(begin), To: to.Sub(begin), Label: fmt.Sprintf("longest pause %.0f ms", ms(to.Sub(from)))}
		c.Series = append(c.Series, s)
		counts = append(counts, fmt.Sprintf("%s %d of %d", cl.name, r.Clients[i].Failed, r.Clients[i].Requests))
	}
	hang := ""
	if r.Scenario == failovertest.Hang {
		hang = fmt.Sprintf(", hang %.0f ms", r.HangForMS)
	}
	c.Subtitle = fmt.Sprintf("detect %.0f ms, DNS lag %.0f ms%s, client DNS TTL %.0f ms; failed requests: %s",
		r.DetectMS, r.DNSLagMS, hang, r.DNSTTLMS, strings.Join(counts, ", "))
	// The phases: no writer from the writer going down to the promotion;
	// a new writer the cluster endpoint does not name yet, from the
	// promotion to the DNS update.
	marks := map[string]string{
		failovertest.EventDNS:           "DNS moved",
		failovertest.EventResumed:       "old writer resumed",
		failovertest.EventFenced:        "old writer fenced",
		failovertest.EventBackAsReader:  "old writer back as reader",
		failovertest.EventFailbackStart: "failback starts",
	}
	var open *timeline.Band
	closeBand := func(at time.Duration) {
		if open != nil {
			open.To = at
			c.Bands = append(c.Bands, *open)
			open = nil
		}
	}
	for _, e := range fres.Events {
		at := e.At.Sub(begin)
		switch e.Name {
		case failovertest.EventWriterDown:
			closeBand(at)
			open = &timeline.Band{Label: "writer down", From: at, Color: "#f9d5d3"}
		case failovertest.EventPromoted:
			closeBand(at)
			open = &timeline.Band{Label: "new writer, DNS lags", From: at, Color: "#fdf1c7"}
		case failovertest.EventDNS:
			closeBand(at)
		}
		if l, ok := marks[e.Name]; ok {
			c.Marks = append(c.Marks, timeline.Mark{Label: l, At: at})
		}
	}
	closeBand(c.Length)
	for _, e := range m.Status().Events {
		if e.Name == "new writer" {
			c.Marks = append(c.Marks, timeline.Mark{Label: "holdfast routes to the new writer", At: e.At.Sub(begin)})
		}
	}
	slices.SortStableFunc(c.Marks, func(a, b timeline.Mark) int { return cmp.Compare(a.At, b.At) })
	c.Notes = []string{"longest pause: the longest time without an acknowledged write. Plain pgxpool reaches the new writer when the cluster endpoint's",
		"DNS moves (and its cache expires); holdfast's monitor routes to it when it is promoted."}
	if n := r.Clients[0].Errors["25006"]; n > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("pgxpool's %d read-only failures (25006): connections its cached DNS answer sent to the old writer, back as a reader.", n))
	}
	return c
}

func hangNote(o options) string {
	if o.Scenario == failovertest.Hang {
		return fmt.Sprintf(", hang %v", o.HangFor)
	}
	return ""
}

// serverList names each server and its address.
func serverList(c *failovertest.Cluster) string {
	var parts []string
	for _, id := range c.ServerIDs() {
		parts = append(parts, id+" "+c.Addr(id))
	}
	return strings.Join(parts, ", ")
}

// createTables creates the clients' tables on the writer.
func createTables(ctx context.Context, c *failovertest.Cluster, clients []*client) error {
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, cl := range clients {
		if _, err := conn.Exec(ctx, fmt.Sprintf(ddl, cl.table)); err != nil {
			return err
		}
	}
	return nil
}

// waitWriter waits until the monitor knows the writer, or ctx ends, or 30 s
// pass.
func waitWriter(ctx context.Context, m failover.Monitor) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		changed := m.Changed()
		if m.Status().Writer != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// printProgress prints a line per second until done is closed.
func printProgress(w io.Writer, begin time.Time, clients []*client, m failover.Monitor, event *atomic.Value, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := make([][2]int64, len(clients))
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		st := m.Status()
		var b strings.Builder
		fmt.Fprintf(&b, "%5.1fs  %-26s holdfast=%-13s", time.Since(begin).Seconds(), event.Load().(string), st.Routing)
		for i, c := range clients {
			ok, failed := c.ok.Load(), c.failed.Load()
			fmt.Fprintf(&b, " | %-8s ok %4d fail %4d", c.name, ok-last[i][0], failed-last[i][1])
			last[i] = [2]int64{ok, failed}
		}
		fmt.Fprintf(&b, " | writer %s, held %d", st.Writer, st.Held)
		fmt.Fprintln(w, b.String())
	}
}

// readinessLog is what the readiness samples saw.
type readinessLog struct {
	seen    map[readiness.Health]bool
	reasons map[string]bool
	changes []TimelineEvent // each change of the answer
}

// sample asks the checker every 100 ms, as a prober would (a check runs
// at most once per CheckInterval; in between, the cached result is
// answered), until done is closed.
func (r *readinessLog) sample(c *readiness.Checker, done <-chan struct{}) {
	r.seen, r.reasons = map[readiness.Health]bool{}, map[string]bool{}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		st := c.Check(ctx)
		cancel()
		r.seen[st.Health] = true
		answer := string(st.Health)
		if st.Health != readiness.Pass {
			r.reasons[st.Reason] = true
			answer += " (" + st.Reason + ")"
		}
		if answer != last {
			r.changes = append(r.changes, TimelineEvent{Source: "readiness", Event: answer, at: time.Now()})
			last = answer
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// writerSpan is a time a server was the cluster's writer (zero times are
// open ends). A promoted server's span starts when the writer before it
// went down: nothing else could take writes from then on.
type writerSpan struct {
	server   string
	from, to time.Time
}

func writerSpans(initial string, events []failovertest.Event) []writerSpan {
	spans := []writerSpan{{server: initial}}
	var down time.Time
	for _, e := range events {
		switch e.Name {
		case failovertest.EventWriterDown:
			down = e.At
			for i := range spans {
				if spans[i].server == e.Server && spans[i].to.IsZero() {
					spans[i].to = e.At
				}
			}
		case failovertest.EventPromoted:
			spans = append(spans, writerSpan{server: e.Server, from: down})
		}
	}
	return spans
}

// wasWriter reports whether server was the writer at some time between
// from and to.
func wasWriter(spans []writerSpan, server string, from, to time.Time) bool {
	for _, s := range spans {
		if s.server == server && (s.from.IsZero() || !s.from.After(to)) && (s.to.IsZero() || !s.to.Before(from)) {
			return true
		}
	}
	return false
}

// measure computes each client's figures and audits their writes on the
// writer at the end.
func measure(ctx context.Context, res *Result, c *failovertest.Cluster, fres failovertest.Result, begin, stopAt time.Time,
	clients []*client) error {
	servers := map[string]string{} // "ip:port" → server id
	for _, id := range c.ServerIDs() {
		servers[c.Addr(id)] = id
	}
	spans := writerSpans(res.OldWriter, fres.Events)
	var promotions, downs []time.Time
	for _, e := range fres.Events {
		switch e.Name {
		case failovertest.EventPromoted:
			promotions = append(promotions, e.At)
		case failovertest.EventWriterDown:
			downs = append(downs, e.At)
		}
	}
	for _, cl := range clients {
		ids, err := c.CommittedIDs(ctx, "public."+cl.table)
		if err != nil {
			return err
		}
		committed := make(map[int64]bool, len(ids))
		for _, id := range ids {
			committed[id] = true
		}
		cr := ClientResult{Name: cl.name, Errors: map[string]int{}, Runner: cl.f != nil}
		var acks []time.Time
		var all []record
		for _, recs := range cl.recs {
			all = append(all, recs...)
		}
		for _, rec := range all {
			cr.Requests++
			cr.Retries += max(rec.attempts-1, 0)
			cr.SlowestMS = max(cr.SlowestMS, ms(rec.end.Sub(rec.start)))
			if rec.unknown {
				cr.OutcomeUnknown++
			}
			if rec.err != "" {
				cr.Failed++
				cr.Errors[rec.err]++
				if committed[rec.id] {
					cr.CommittedUnacknowledged++
				}
				continue
			}
			cr.OK++
			cr.Acknowledged++
			acks = append(acks, rec.end)
			if !committed[rec.id] {
				cr.LostWrites++
			}
			if id, ok := servers[rec.server]; !ok || !wasWriter(spans, id, rec.start, rec.end) {
				cr.MisplacedWrites++
			}
		}
		cr.MaxPauseMS = ms(longestGap(begin, stopAt, acks))
		for _, p := range promotions {
			until := stopAt
			for _, d := range downs {
				if d.After(p) {
					until = d
					break
				}
			}
			var first time.Time
			for _, rec := range all {
				if rec.err == "" && !rec.start.Before(p) && rec.end.Before(until) && (first.IsZero() || rec.end.Before(first)) {
					first = rec.end
				}
			}
			var r *float64
			if !first.IsZero() {
				v := ms(first.Sub(p))
				r = &v
			}
			cr.ResumeEachMS = append(cr.ResumeEachMS, r)
		}
		cr.ResumeMS = slowestResume(cr.ResumeEachMS)
		res.Clients = append(res.Clients, cr)
	}
	return nil
}

// slowestResume is the longest of the resume times, nil when one is nil
// (never resumed) or there are none.
func slowestResume(each []*float64) *float64 {
	var out *float64
	for _, v := range each {
		if v == nil {
			return nil
		}
		if out == nil || *v > *out {
			out = v
		}
	}
	return out
}

// longestGap is the longest time between begin, the acknowledgements and
// end.
func longestGap(begin, end time.Time, acks []time.Time) time.Duration {
	from, to := longestGapSpan(begin, end, acks)
	return to.Sub(from)
}

// longestGapSpan is the longest time between begin, the acknowledgements
// and end: its start and its end (the first of the longest).
func longestGapSpan(begin, end time.Time, acks []time.Time) (from, to time.Time) {
	slices.SortFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
	from, to = begin, begin
	prev := begin
	for _, a := range acks {
		if a.Sub(prev) > to.Sub(from) {
			from, to = prev, a
		}
		prev = a
	}
	if end.Sub(prev) > to.Sub(from) {
		from, to = prev, end
	}
	return from, to
}

// readiness records the health values and reasons seen.
func (r *Result) readiness(rd *readinessLog) {
	r.Readiness, r.ReadinessReasons = []string{}, []string{}
	for _, h := range []readiness.Health{readiness.Pass, readiness.Warn, readiness.Fail} {
		if rd.seen[h] {
			r.Readiness = append(r.Readiness, string(h))
		}
	}
	for reason := range rd.reasons {
		r.ReadinessReasons = append(r.ReadinessReasons, reason)
	}
	sort.Strings(r.ReadinessReasons)
}

func (r *Result) monitor(m failover.Monitor) {
	st := m.Status()
	r.Monitor = MonitorResult{Writer: st.Writer, Routing: st.Routing, Failovers: st.Failovers, Held: st.Held, MonitorConnects: st.MonitorConnects}
}

// timeline merges the simulator's events, the monitor's and the readiness
// changes, in ms from the writer going down.
func (r *Result) timeline(fres failovertest.Result, m failover.Monitor, rd *readinessLog) {
	anchor, _ := fres.At(failovertest.EventWriterDown)
	var tl []TimelineEvent
	for _, e := range fres.Events {
		tl = append(tl, TimelineEvent{Source: "simulator", Event: e.Name, Server: e.Server, at: e.At})
	}
	for _, e := range m.Status().Events {
		tl = append(tl, TimelineEvent{Source: "holdfast", Event: e.Name, Server: e.Server, at: e.At})
	}
	tl = append(tl, rd.changes...)
	sort.SliceStable(tl, func(i, j int) bool { return tl[i].at.Before(tl[j].at) })
	for i := range tl {
		tl[i].OffsetMS = ms(tl[i].at.Sub(anchor))
	}
	r.Timeline = tl
}

// goals checks the targets on the figures.
func (r *Result) goals() {
	plain, hf := r.Clients[0], r.Clients[1]
	g := &r.Goals
	g.ResumeWithin1500ms = resumedWithin(hf, 1500)
	if plain.MaxPauseMS > 0 {
		g.PauseRatio = hf.MaxPauseMS / plain.MaxPauseMS
	}
	g.PauseAtMost20pct = plain.MaxPauseMS > 0 && g.PauseRatio <= 0.2
	g.NoLostWrites = plain.LostWrites == 0 && hf.LostWrites == 0
	g.ReadinessNeverFailed = !slices.Contains(r.Readiness, string(readiness.Fail))
	if len(r.Clients) > 2 {
		s := r.Clients[2]
		sg := &SQLGoals{ResumeWithin1500ms: resumedWithin(s, 1500)}
		if plain.MaxPauseMS > 0 {
			sg.PauseRatio = s.MaxPauseMS / plain.MaxPauseMS
		}
		sg.PauseAtMost20pct = plain.MaxPauseMS > 0 && sg.PauseRatio <= 0.2
		sg.NoLostWrites = s.LostWrites == 0 && s.MisplacedWrites == 0
		sg.NoFailedRequests = s.Failed == 0
		sg.Met = sg.ResumeWithin1500ms && sg.PauseAtMost20pct && sg.NoLostWrites && sg.NoFailedRequests
		g.DatabaseSQL = sg
	}
}

// resumedWithin reports whether c wrote again within limit ms of each
// promotion.
func resumedWithin(c ClientResult, limit float64) bool {
	if len(c.ResumeEachMS) == 0 {
		return false
	}
	for _, v := range c.ResumeEachMS {
		if v == nil || *v > limit {
			return false
		}
	}
	return true
}

// print writes the timeline, the side-by-side table, the goals and the
// legend.
func (r *Result) print(w io.Writer) {
	hang := ""
	if r.Scenario == failovertest.Hang {
		hang = fmt.Sprintf(", hang %.0f ms", r.HangForMS)
	}
	fmt.Fprintf(w, "\nsimulated failover (%s, %s): writer %s → %s; detect %.0f ms, DNS lag %.0f ms%s, client DNS TTL %.0f ms\n",
		r.Scenario, r.Engine, r.OldWriter, r.NewWriter, r.DetectMS, r.DNSLagMS, hang, r.DNSTTLMS)
	fmt.Fprintf(w, "\ntimeline (ms from the writer going down):\n")
	for _, e := range r.Timeline {
		fmt.Fprintf(w, "  %8.0f ms  %-9s  %-26s %s\n", e.OffsetMS, e.Source, e.Event, e.Server)
	}
	fmt.Fprintln(w)
	row := func(label string, v func(ClientResult) string) {
		fmt.Fprintf(w, "%-32s", label)
		for _, c := range r.Clients {
			fmt.Fprintf(w, " %12s", v(c))
		}
		fmt.Fprintln(w)
	}
	row("", func(c ClientResult) string { return c.Name })
	row("requests", func(c ClientResult) string { return fmt.Sprint(c.Requests) })
	row("failed requests", func(c ClientResult) string { return fmt.Sprint(c.Failed) })
	keys := map[string]bool{}
	for _, c := range r.Clients {
		for k := range c.Errors {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		row("  "+describe(k), func(c ClientResult) string { return fmt.Sprint(c.Errors[k]) })
	}
	row("outcome unknown", func(c ClientResult) string {
		if !c.Runner {
			return "-"
		}
		return fmt.Sprint(c.OutcomeUnknown)
	})
	row("application retries", func(c ClientResult) string { return fmt.Sprint(c.Retries) })
	row("acknowledged writes", func(c ClientResult) string { return fmt.Sprint(c.Acknowledged) })
	row("lost writes", func(c ClientResult) string { return fmt.Sprint(c.LostWrites) })
	row("misplaced writes", func(c ClientResult) string { return fmt.Sprint(c.MisplacedWrites) })
	row("committed, not acknowledged", func(c ClientResult) string { return fmt.Sprint(c.CommittedUnacknowledged) })
	row("longest pause (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.MaxPauseMS) })
	row("resume after promotion (ms)", resumeList)
	row("slowest request (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.SlowestMS) })

	reasons := ""
	if len(r.ReadinessReasons) > 0 {
		reasons = " (reasons: " + strings.Join(r.ReadinessReasons, ", ") + ")"
	}
	fmt.Fprintf(w, "\nholdfast readiness answers seen: %s%s\n", strings.Join(r.Readiness, ", "), reasons)
	fmt.Fprintf(w, "holdfast monitor: writer %s, routing %s, %d failover(s) seen, %d connect(s) held then released, %d monitor connection(s)\n",
		r.Monitor.Writer, r.Monitor.Routing, r.Monitor.Failovers, r.Monitor.Held, r.Monitor.MonitorConnects)
	yes := func(b bool) string {
		if b {
			return "met"
		}
		return "NOT MET"
	}
	g := r.Goals
	fmt.Fprintf(w, "\ngoals:\n")
	fmt.Fprintf(w, "  holdfast resumes within 1.5 s of each promotion   %s\n", yes(g.ResumeWithin1500ms))
	fmt.Fprintf(w, "  holdfast's longest pause ≤ 20%% of pgxpool's        %s (%.0f%%)\n", yes(g.PauseAtMost20pct), 100*g.PauseRatio)
	fmt.Fprintf(w, "  no lost writes (both clients)                     %s\n", yes(g.NoLostWrites))
	fmt.Fprintf(w, "  holdfast readiness never fails                    %s\n", yes(g.ReadinessNeverFailed))
	if s := g.DatabaseSQL; s != nil {
		c := r.Clients[2]
		fmt.Fprintf(w, "  database/sql meets the same goals                 %s (resume %s ms, pause %.0f%% of pgxpool's, %d lost, %d misplaced, %d failed)\n",
			yes(s.Met), resumeList(c), 100*s.PauseRatio, c.LostWrites, c.MisplacedWrites, c.Failed)
	}
	fmt.Fprint(w, `
legend:
progress lines: requests that succeeded and failed in that second; holdfast= is the
  monitor's routing (normal, held: writer down and no other known, redirect: the
  writer endpoint's DNS still lags the new writer); held counts the connects holdfast
  held while no writer was known and then released, so far.
timeline: the simulator stamps each step once it is done (the writer is down a
  little before "writer down"), so holdfast's first events can show negative offsets.
failed requests: requests that still failed after the retry (pgxpool: the application's
  loop, up to 6 attempts, each at most 3 s; holdfast: its transaction runner with its
  defaults; the request at most 15 s), by SQLSTATE, else by holdfast's error class/reason. failover-held: a connect held
  while no writer was known, past the attempt's bound; failover-cut: a connection to
  the old writer closed by holdfast after the failover; failover-not-writer: a
  connection by the writer endpoint that reached a reader, refused.
acknowledged writes: requests whose COMMIT succeeded.
lost writes: acknowledged ids missing on the writer at the end. Replication is
  synchronous, so an acknowledged write is on the promoted replica: 0 is the goal.
misplaced writes: acknowledged writes whose transaction was answered by a server
  that was not the cluster's writer at any time during the request (a split brain).
  It cannot happen here, and is measured anyway: a server that is not the writer
  runs in hot standby and refuses writes (25006); a hung old writer, resumed, cannot
  commit (its synchronous standby was promoted) and is fenced at once.
committed, not acknowledged: rows present whose request failed (an ambiguous
  COMMIT: applied, the answer lost). Not an error, and not misplaced: the caller
  was told it failed, and a retry of the idempotent transaction finds the row.
outcome unknown: requests whose COMMIT was sent and whose answer was lost: holdfast's
  runner returns holdfast.ErrOutcomeUnknown and never runs them again; this program
  then looks the request's id up on the writer (done if found, run again if not), as
  an application with an idempotency key does ("-": a hand-written loop cannot tell,
  and re-runs them).
application retries: runs of a whole transaction after its first, by the workload's own
  retry: for pgxpool the loop this program writes around each transaction (pgxpool itself
  retries nothing), for holdfast its runner, which re-runs only what did not commit.
longest pause: the longest time without an acknowledged write, from the start
  of the workload to its end. A client stuck on the old writer, back as a reader,
  pauses until the end of the run.
resume after promotion: from the replica taking writes to the first acknowledged
  write that started after it; "never" when none did before the next fault or the
  end of the run (a failback has two promotions).
slowest request: the longest single request, retries included (holdfast holds
  its requests while no writer is known, instead of failing them).
readiness: the answers of a readiness.Checker on the holdfast pool, asked every
  100 ms: warn (reason "failover") while the cluster fails over, never fail.
`)
	if g.DatabaseSQL != nil {
		fmt.Fprint(w, `database/sql (-sql): a *sql.DB of package sqldb over its own holdfast pool of the
  same factory (the same failover monitor: its held connects count in held), the
  same transaction and retry; the retry also runs again a transaction that
  database/sql reports as driver.ErrBadConn (nothing of it was sent;
  transient/sql-bad-conn when it still failed). Its goals are holdfast's: resume
  within 1.5 s of each promotion, longest pause ≤ 20% of pgxpool's, no lost or
  misplaced write, no failed request.
`)
	}
}

// resumeList is c's resume times, in ms ("never" for none).
func resumeList(c ClientResult) string {
	var parts []string
	for _, v := range c.ResumeEachMS {
		if v == nil {
			parts = append(parts, "never")
		} else {
			parts = append(parts, fmt.Sprintf("%.0f", *v))
		}
	}
	return strings.Join(parts, ", ")
}

// describe names an error key for the table.
func describe(k string) string {
	names := map[string]string{
		"57P01": "57P01 terminated",
		"57P03": "57P03 cannot connect",
		"25006": "25006 read-only",
		"08006": "08006 connection failure",
	}
	if n, ok := names[k]; ok {
		return n
	}
	if len(k) > 29 {
		return k[:29]
	}
	return k
}
