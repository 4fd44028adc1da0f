// Command readers plays the life of an Aurora cluster's readers on this
// machine and runs the same read workload through a plain pgxpool and
// through a holdfast pool, both on the reader endpoint, side by side.
//
// It starts a simulated Aurora cluster (package fakes/failovertest): a
// writer and -readers readers, real PostgreSQL servers kept in step by
// physical replication, with RDS's names in a fake DNS. Like Aurora's, the
// reader endpoint answers each lookup with one reader at random, and the
// clients read it through a cache with a TTL (-dns-ttl, 5 s as Aurora
// publishes). Each client has a pool of -pool connections (MinConns =
// MaxConns, so they open at the start) under its own login role, so that
// the simulator counts each client's connections per reader
// (pg_stat_activity); -workers workers per client run a read that returns
// the server that answered it (SELECT aurora_db_instance_identifier()),
// each tried once, bounded by -request-timeout, ok or failed.
//
// The phases, one run, both clients on the same cluster at once:
//
//   - steady (-steady): the connections per reader, sampled every 250 ms;
//     its figure is the largest max/min over the readers of any sample.
//   - add: a reader joins (Cluster.AddReader: the topology and the reader
//     endpoint list it); -join-wait (10 s) later, its connections of each
//     client ÷ its fair share (the client's reader connections ÷ the
//     readers).
//   - crash: a reader dies (pg_ctl stop -m immediate), the one with most of
//     the plain pool's connections; it stays in the topology and behind
//     the reader endpoint, as on Aurora until the failure is detected. Per
//     client: the failed reads, those that started after the crash
//     (beyond the reads in flight), and the time from the crash until
//     every worker reads again (-crash-for of workload before the next
//     phase; the figures count to the end of the run).
//   - lag: another reader, the one that served most of holdfast's reads
//     since the crash, lags -lag (the topology's replica_lag_in_msec
//     and a real recovery_min_apply_delay). holdfast runs with
//     Readers.MaxLag -max-lag and RefreshInterval -refresh (1 s here, so
//     that "MaxLag + one topology refresh" is short; the default while a
//     reader pool is open is Readers.RefreshInterval, 5 s):
//     the reads served by the lagging reader that started after MaxLag +
//     one refresh from the lag (-lag-for of workload).
//
// The holdfast client is holdfast.New(holdfast.WithFailover(failover.Config{
// RefreshInterval: -refresh, Readers: failover.ReaderConfig{MaxLag:
// -max-lag}})) and Factory.NewPool: each new connection by the reader
// endpoint dials the reader of the monitor's topology with the fewest of
// the pool's connections, a reader that joins gets its share (the busiest
// readers' surplus connections are retired), a reader lagging beyond
// MaxLag gets no new connection and the pool's connections to it are
// retired. The plain client is pgxpool with the same
// config: its connections go where the cached DNS answer says.
//
// It prints a progress line per second (phase, reads ok and failed per
// client in that second, connections per reader per client), the
// connections and reads per reader at the end of each phase, a table
// (rows: requests, failed, reader connections max/min, new reader share,
// resume after crash, lagging reads; columns pgxpool, holdfast), the goals
// and a legend. With -json it prints one JSON object on stdout instead (its
// clients array: name, requests, failed, reader_connections_max_min,
// new_reader_share, resume_after_crash_ms, lagging_reads, and more; the
// phases and the samples too); progress goes to stderr.
//
// Run it with: go run ./examples/readers (about 40 s: the cluster's start
// and the added reader's pg_basebackup take a few seconds each); -json for
// the JSON object; -v for holdfast's logs on stderr. It needs only Go and
// the PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup on PATH or
// in a usual place).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// options are the command's flags.
type options struct {
	Readers        int           // readers at the start
	Pool           int           // connections per pool (MinConns = MaxConns)
	Workers        int           // read workers per client
	Think          time.Duration // pause between a worker's reads
	Steady         time.Duration // the steady phase
	JoinWait       time.Duration // from the added reader joining to its share's measure
	CrashFor       time.Duration // workload after the crash
	Lag            time.Duration // the lagging reader's lag
	MaxLag         time.Duration // holdfast's Readers.MaxLag
	LagFor         time.Duration // workload after MaxLag + one refresh from the lag
	Refresh        time.Duration // holdfast's RefreshInterval
	DNSTTL         time.Duration // client-side DNS cache TTL (0: no cache)
	RequestTimeout time.Duration // bounds each read
	Sample         time.Duration // connection sampling interval
	Seed           uint64        // the reader endpoint's random answers (0: random)
	JSON           bool
	Verbose        bool   // holdfast's logs on stderr
	Name           string // cluster name
}

func defaultOptions() options {
	return options{
		Readers:        3,
		Pool:           12,
		Workers:        4,
		Think:          10 * time.Millisecond,
		Steady:         5 * time.Second,
		JoinWait:       10 * time.Second,
		CrashFor:       5 * time.Second,
		Lag:            3 * time.Second,
		MaxLag:         time.Second,
		LagFor:         5 * time.Second,
		Refresh:        time.Second,
		DNSTTL:         failovertest.DefaultTTL,
		RequestTimeout: 2 * time.Second,
		Sample:         250 * time.Millisecond,
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
		fmt.Fprintln(stderr, "readers:", err)
		return 1
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintln(stderr, "readers:", err)
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
	fs := flag.NewFlagSet("readers", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&o.Readers, "readers", o.Readers, "readers at the start (one more joins mid-run)")
	fs.IntVar(&o.Pool, "pool", o.Pool, "connections per pool (MinConns = MaxConns); a multiple of -readers and -readers+1 makes an even spread possible")
	fs.IntVar(&o.Workers, "workers", o.Workers, "read workers per client")
	fs.DurationVar(&o.Think, "think", o.Think, "pause between a worker's reads")
	fs.DurationVar(&o.Steady, "steady", o.Steady, "the steady phase")
	fs.DurationVar(&o.JoinWait, "join-wait", o.JoinWait, "from the added reader joining to the measure of its share")
	fs.DurationVar(&o.CrashFor, "crash-for", o.CrashFor, "workload after a reader crashes")
	fs.DurationVar(&o.Lag, "lag", o.Lag, "the lag spike of one reader")
	fs.DurationVar(&o.MaxLag, "max-lag", o.MaxLag, "holdfast's failover.ReaderConfig.MaxLag")
	fs.DurationVar(&o.LagFor, "lag-for", o.LagFor, "workload after MaxLag + one refresh from the lag spike")
	fs.DurationVar(&o.Refresh, "refresh", o.Refresh, "holdfast's failover.Config.RefreshInterval (default there: 30 s, and 5 s while a reader pool is open)")
	fs.DurationVar(&o.DNSTTL, "dns-ttl", o.DNSTTL, "client-side DNS cache TTL (0: no cache)")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "bound of each read")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the reader endpoint's random answers (0: random)")
	fs.BoolVar(&o.JSON, "json", false, "print the result as one JSON object (progress goes to stderr)")
	fs.BoolVar(&o.Verbose, "v", false, "print holdfast's logs on stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	fail := func(format string, a ...any) (options, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintln(errOut, "readers:", err)
		return o, err
	}
	if fs.NArg() > 0 {
		return fail("unexpected arguments %q", fs.Args())
	}
	switch {
	case o.Readers < 2 || o.Readers >= failovertest.MaxReplicas:
		return fail("-readers %d: want 2 to %d (one crashes, one lags, one joins)", o.Readers, failovertest.MaxReplicas-1)
	case o.Pool < o.Readers+1:
		return fail("-pool %d: want at least -readers + 1 (%d)", o.Pool, o.Readers+1)
	case o.Workers < 1:
		return fail("-workers %d: must be at least 1", o.Workers)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"think", o.Think}, {"steady", o.Steady}, {"join-wait", o.JoinWait}, {"crash-for", o.CrashFor},
		{"lag", o.Lag}, {"max-lag", o.MaxLag}, {"lag-for", o.LagFor}, {"dns-ttl", o.DNSTTL}} {
		if d.v < 0 {
			return fail("-%s %v: must not be negative", d.name, d.v)
		}
	}
	if o.Refresh <= 0 || o.RequestTimeout <= 0 {
		return fail("-refresh %v, -request-timeout %v: must be positive", o.Refresh, o.RequestTimeout)
	}
	if o.MaxLag == 0 || o.Lag <= o.MaxLag {
		return fail("-lag %v, -max-lag %v: want 0 < max-lag < lag", o.Lag, o.MaxLag)
	}
	return o, nil
}

// Result is what the command measured; its JSON form is the -json output.
type Result struct {
	Engine           failovertest.Engine `json:"engine"`
	ReadersAtStart   int                 `json:"readers_at_start"`
	PoolSize         int                 `json:"pool_size"`
	Workers          int                 `json:"workers"`
	RefreshMS        float64             `json:"refresh_interval_ms"`
	MaxLagMS         float64             `json:"max_lag_ms"`
	LagMS            float64             `json:"lag_ms"`
	DNSTTLMS         float64             `json:"dns_ttl_ms"`
	JoinWaitMS       float64             `json:"join_wait_ms"`
	AddedReader      string              `json:"added_reader"`
	AddReaderTookMS  float64             `json:"add_reader_took_ms"` // AddReader's own time (pg_basebackup)
	CrashedReader    string              `json:"crashed_reader"`
	LaggingReader    string              `json:"lagging_reader"`
	LagCutoffAfterMS float64             `json:"lag_cutoff_after_ms"` // MaxLag + one refresh
	// Clients are pgxpool, then holdfast.
	Clients []ClientResult `json:"clients"`
	// Phases are the run's phases, in ms from the start of the workload.
	Phases []Phase `json:"phases"`
	// Samples are the connections per reader per client, every 250 ms
	// (a reader down is left out).
	Samples []Sample `json:"samples"`
	Goals   Goals    `json:"goals"`
}

// ClientResult is one client's figures.
type ClientResult struct {
	Name     string `json:"name"` // "pgxpool" or "holdfast"
	Requests int    `json:"requests"`
	OK       int    `json:"ok"`
	Failed   int    `json:"failed"`
	// ReaderConnectionsMaxMin is the largest, over the steady phase's
	// samples, of the most connections on a reader over the fewest; null
	// when a reader had none (unbounded): see ReaderConnectionsMin/Max.
	ReaderConnectionsMaxMin *float64 `json:"reader_connections_max_min"`
	ReaderConnectionsMin    int      `json:"reader_connections_min"` // the fewest on a reader, over the steady phase
	ReaderConnectionsMax    int      `json:"reader_connections_max"` // the most on a reader, over the steady phase
	// NewReaderShare is the added reader's connections ÷ its fair share
	// (the client's reader connections ÷ the readers), JoinWait after it
	// joined.
	NewReaderShare       float64 `json:"new_reader_share"`
	NewReaderConnections int     `json:"new_reader_connections"`
	NewReaderFairShare   float64 `json:"new_reader_fair_share"`
	// NewReader80pctMS: from the join to the first sample where it held
	// ≥ 80 % of its fair share; null if none did before the crash.
	NewReader80pctMS *float64 `json:"new_reader_80pct_ms"`
	// ResumeAfterCrashMS: from the crash until every worker reads again
	// (each worker's first successful read after its last failure, or
	// after the crash when it had none), up to the end of the run (the
	// lag phase fails no read); null when one never read again.
	ResumeAfterCrashMS *float64 `json:"resume_after_crash_ms"`
	// FailedAtCrash: reads that failed from the crash to the end of the
	// run (reads in flight at the crash included); FailedBeyondInFlight:
	// those of them that started after CrashReader returned, when the
	// reader was dead already (not in flight when it died).
	FailedAtCrash        int `json:"failed_at_crash"`
	FailedBeyondInFlight int `json:"failed_beyond_in_flight"`
	// LaggingReads: successful reads served by the lagging reader that
	// started after the lag + MaxLag + one refresh; LaggingReadsAll, every
	// read it served from the lag on.
	LaggingReads    int            `json:"lagging_reads"`
	LaggingReadsAll int            `json:"lagging_reads_all"`
	Errors          map[string]int `json:"errors"` // SQLSTATE, or class/reason
	// PerPhase: per phase, the reads served per server and the
	// connections per reader at the phase's last sample.
	PerPhase []PhaseFigures `json:"per_phase"`
}

// PhaseFigures are a client's figures in one phase.
type PhaseFigures struct {
	Phase       string         `json:"phase"`
	Reads       map[string]int `json:"reads_per_server"`
	Failed      int            `json:"failed"`
	Connections map[string]int `json:"connections_per_reader"`
}

// Phase is one phase of the run, in ms from the start of the workload.
type Phase struct {
	Name    string  `json:"name"`
	StartMS float64 `json:"start_ms"`
	EndMS   float64 `json:"end_ms"`

	start, end time.Time
}

// Sample is the connections per reader of each client at one time.
type Sample struct {
	AtMS  float64                   `json:"at_ms"`
	Phase string                    `json:"phase"`
	Conns map[string]map[string]int `json:"connections"` // client → reader → connections

	at time.Time
}

// Goals are the targets, checked on holdfast's figures of this run.
type Goals struct {
	SpreadAtMost125       bool `json:"spread_at_most_1_25"`          // reader connections max/min ≤ 1.25
	NewReaderAtLeast80pct bool `json:"new_reader_at_least_80pct"`    // ≥ 80 % of its fair share within JoinWait
	ResumeWithin1s        bool `json:"resume_after_crash_within_1s"` // every worker reads again within 1 s
	NoFailedBeyondFlight  bool `json:"no_failed_beyond_in_flight"`   // no read that started after the crash failed
	NoLaggingReads        bool `json:"no_lagging_reads"`             // none served by the lagging reader after MaxLag + one refresh
	Met                   bool `json:"met"`                          // all of the above
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// client is one pool under the workload.
type client struct {
	name string // also its login role
	pool *pgxpool.Pool

	ok, failed atomic.Int64
	recs       [][]record // per worker

	mu     sync.Mutex
	served map[string]int // successful reads per server, so far
}

// servedSoFar returns a copy of c.served.
func (c *client) servedSoFar() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.served)
}

// record is one read.
type record struct {
	start, end time.Time
	server     string // the server id that answered; "" when it failed
	err        string // "" when it succeeded
}

// read is the workload's query: it returns the server that answered.
const read = "SELECT aurora_db_instance_identifier()"

// loop runs reads until stop is closed.
func (c *client) loop(worker int, stop <-chan struct{}, think, timeout time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		start := time.Now()
		// Each read is bounded; the stop signal never cancels one midway.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		var server string
		err := c.pool.QueryRow(ctx, read).Scan(&server)
		cancel()
		r := record{start: start, end: time.Now()}
		if err != nil {
			r.err = errorKey(err)
			c.failed.Add(1)
		} else {
			r.server = server
			c.ok.Add(1)
			c.mu.Lock()
			c.served[server]++
			c.mu.Unlock()
		}
		c.recs[worker] = append(c.recs[worker], r)
		t.Reset(think)
	}
}

// classifier names errors that carry no SQLSTATE (holdfast's among them).
var classifier = classify.New(failover.Rule)

// errorKey is the SQLSTATE of err, else its class and reason.
func errorKey(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return classifier.Classify(err).String()
}

// run starts a cluster, plays the phases under the workload and returns
// the measurements. progress receives the live lines.
func run(ctx context.Context, o options, progress io.Writer) (*Result, error) {
	if o.Readers < 2 || o.Pool < 1 || o.Workers < 1 || o.Refresh <= 0 || o.RequestTimeout <= 0 || o.Sample <= 0 {
		return nil, fmt.Errorf("invalid options %+v", o)
	}
	// The phases' messages and the progress lines write at once.
	progress = &syncWriter{w: progress}
	ttl := o.DNSTTL
	if ttl == 0 {
		ttl = -1 // no cache
	}
	fmt.Fprintf(progress, "starting cluster %q (Aurora): a writer and %d readers (PostgreSQL, physical replication) ...\n", o.Name, o.Readers)
	c, err := failovertest.Start(ctx, failovertest.Config{Name: o.Name, Replicas: o.Readers, TTL: ttl, Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if c.SingleIP {
		fmt.Fprintf(progress, "mode: single address: the servers listen on 127.0.0.1, each on its own port (%s)\n", serverList(c))
	} else {
		fmt.Fprintf(progress, "mode: an address per server (%s)\n", serverList(c))
	}
	clients := []*client{{name: "pgxpool", served: map[string]int{}}, {name: "holdfast", served: map[string]int{}}}
	if err := createRoles(ctx, c, clients); err != nil {
		return nil, err
	}
	// The same config for both pools: the reader endpoint through the
	// client-side DNS cache (PoolConfig sets its LookupFunc), the client's
	// own role, every connection opened at the start.
	poolCfg := func(user string) (*pgxpool.Config, error) {
		cfg, err := c.PoolConfig(c.ReaderEndpoint)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.User = user
		cfg.MinConns, cfg.MaxConns = int32(o.Pool), int32(o.Pool)
		return cfg, nil
	}

	cfg, err := poolCfg(clients[0].name)
	if err != nil {
		return nil, err
	}
	plainPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer plainPool.Close()
	clients[0].pool = plainPool

	logOut := io.Discard
	if o.Verbose {
		logOut = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{
		Logger:          logger,
		RefreshInterval: o.Refresh,
		Readers:         failover.ReaderConfig{MaxLag: o.MaxLag},
	}), holdfast.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if cfg, err = poolCfg(clients[1].name); err != nil {
		return nil, err
	}
	hfPool, err := f.NewPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer hfPool.Close()
	clients[1].pool = hfPool
	if f.Failover(hfPool) == nil {
		return nil, errors.New("holdfast installed no failover monitor on the pool")
	}
	// Both pools open their MinConns in the background: wait for them.
	for _, cl := range clients {
		if err := waitOpen(ctx, cl.pool, o.Pool); err != nil {
			return nil, fmt.Errorf("%s: %w", cl.name, err)
		}
	}
	fmt.Fprintf(progress, "reader endpoint %s; DNS TTL %v; pools of %d (MinConns = MaxConns), %d workers each; "+
		"holdfast RefreshInterval %v (default 5 s with a reader pool), Readers.MaxLag %v\n",
		c.ReaderEndpoint, o.DNSTTL, o.Pool, o.Workers, o.Refresh, o.MaxLag)

	// The workload, the samples and the progress lines.
	var phase atomic.Value
	phase.Store("steady")
	smp := newSampler(c, clients)
	defer smp.close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	begin := time.Now()
	for _, cl := range clients {
		cl.recs = make([][]record, o.Workers)
		for w := range o.Workers {
			wg.Go(func() { cl.loop(w, stop, o.Think, o.RequestTimeout) })
		}
	}
	samplesDone := make(chan struct{})
	var swg sync.WaitGroup
	swg.Go(func() { smp.run(ctx, &phase, o.Sample, samplesDone) })
	swg.Go(func() { printProgress(progress, begin, clients, smp, &phase, samplesDone) })
	stopped := false
	stopAll := func() {
		if stopped {
			return
		}
		stopped = true
		close(stop)
		wg.Wait()
		close(samplesDone)
		swg.Wait()
	}
	defer stopAll()

	res := &Result{Engine: failovertest.Aurora, ReadersAtStart: o.Readers, PoolSize: o.Pool, Workers: o.Workers,
		RefreshMS: ms(o.Refresh), MaxLagMS: ms(o.MaxLag), LagMS: ms(o.Lag), DNSTTLMS: ms(o.DNSTTL), JoinWaitMS: ms(o.JoinWait),
		LagCutoffAfterMS: ms(o.MaxLag + o.Refresh)}
	var phases []Phase
	mark := func(name string) {
		now := time.Now()
		if n := len(phases); n > 0 {
			phases[n-1].end = now
		}
		phases = append(phases, Phase{Name: name, start: now})
		phase.Store(name)
	}
	mark("steady")
	original := c.Readers()

	// Steady.
	if err := sleepCtx(ctx, o.Steady); err != nil {
		return nil, err
	}

	// A reader joins.
	mark("add")
	fmt.Fprintf(progress, "adding a reader (pg_basebackup from the writer) ...\n")
	addStart := time.Now()
	added, err := c.AddReader(ctx)
	if err != nil {
		return nil, err
	}
	joined := time.Now()
	res.AddedReader, res.AddReaderTookMS = added, ms(joined.Sub(addStart))
	fmt.Fprintf(progress, "reader %s joined (AddReader took %v); its share in %v\n", added, joined.Sub(addStart).Round(time.Millisecond), o.JoinWait)
	if err := sleepCtx(ctx, time.Until(joined.Add(o.JoinWait))); err != nil {
		return nil, err
	}
	share := map[string][2]int{} // client → {its connections on the added reader, on every reader}
	for _, id := range c.Readers() {
		counts, err := countOn(ctx, c, id, smp.users)
		if err != nil {
			return nil, err
		}
		for _, cl := range clients {
			sh := share[cl.name]
			sh[1] += counts[cl.name]
			if id == added {
				sh[0] = counts[cl.name]
			}
			share[cl.name] = sh
		}
	}
	readersAfterJoin := len(c.Readers())

	// A reader crashes: the one with most of the plain pool's connections
	// (the fault bites where it should), else the first.
	mark("crash")
	crashed := original[0]
	if last, ok := smp.last(); ok {
		most := -1
		for _, id := range original {
			if n := last.Conns[clients[0].name][id]; n > most {
				crashed, most = id, n
			}
		}
	}
	fmt.Fprintf(progress, "crashing reader %s (pg_ctl stop -m immediate; it stays in the topology and DNS) ...\n", crashed)
	smp.down(crashed)
	crashAt := time.Now()
	if err := c.CrashReader(ctx, crashed); err != nil {
		return nil, err
	}
	crashDone := time.Now()
	res.CrashedReader = crashed
	servedBefore := clients[1].servedSoFar()
	if err := sleepCtx(ctx, o.CrashFor); err != nil {
		return nil, err
	}

	// A lag spike on another reader: the one that served most of
	// holdfast's reads since the crash (so that the spike bites holdfast,
	// whose goal it is), else the first running one.
	mark("lag")
	lagging, most := "", -1
	servedNow := clients[1].servedSoFar()
	for _, id := range c.Readers() {
		if id == crashed {
			continue
		}
		if n := servedNow[id] - servedBefore[id]; n > most {
			lagging, most = id, n
		}
	}
	fmt.Fprintf(progress, "reader %s lags %v (MaxLag %v, refresh %v: reads on it after %v count) ...\n", lagging, o.Lag, o.MaxLag, o.Refresh, o.MaxLag+o.Refresh)
	lagAt := time.Now()
	if err := c.SetLag(ctx, lagging, o.Lag); err != nil {
		return nil, err
	}
	res.LaggingReader = lagging
	cutoff := lagAt.Add(o.MaxLag + o.Refresh)
	if err := sleepCtx(ctx, time.Until(cutoff.Add(o.LagFor))); err != nil {
		return nil, err
	}
	stopAll()
	end := time.Now()
	phases[len(phases)-1].end = end

	// The figures.
	for i := range phases {
		phases[i].StartMS, phases[i].EndMS = ms(phases[i].start.Sub(begin)), ms(phases[i].end.Sub(begin))
	}
	res.Phases = phases
	res.Samples = smp.samples
	for i := range res.Samples {
		res.Samples[i].AtMS = ms(res.Samples[i].at.Sub(begin))
	}
	for _, cl := range clients {
		cr := ClientResult{Name: cl.name, Errors: map[string]int{}}
		var all []record
		for _, recs := range cl.recs {
			all = append(all, recs...)
		}
		for _, r := range all {
			cr.Requests++
			if r.err != "" {
				cr.Failed++
				cr.Errors[r.err]++
			} else {
				cr.OK++
			}
		}
		// Steady: the worst max/min of a sample.
		lo, hi, worst := math.MaxInt, 0, 0.0
		for _, s := range res.Samples {
			if s.Phase != "steady" {
				continue
			}
			slo, shi := math.MaxInt, 0
			for _, id := range original {
				n := s.Conns[cl.name][id]
				slo, shi = min(slo, n), max(shi, n)
			}
			lo, hi = min(lo, slo), max(hi, shi)
			if slo == 0 {
				worst = math.Inf(1)
			} else {
				worst = max(worst, float64(shi)/float64(slo))
			}
		}
		if lo == math.MaxInt {
			lo = 0
		}
		cr.ReaderConnectionsMin, cr.ReaderConnectionsMax = lo, hi
		if !math.IsInf(worst, 1) && worst > 0 {
			cr.ReaderConnectionsMaxMin = &worst
		}
		// The added reader's share.
		sh := share[cl.name]
		cr.NewReaderConnections = sh[0]
		cr.NewReaderFairShare = float64(sh[1]) / float64(readersAfterJoin)
		if cr.NewReaderFairShare > 0 {
			cr.NewReaderShare = float64(sh[0]) / cr.NewReaderFairShare
		}
		for _, s := range res.Samples {
			if s.at.Before(joined) || !s.at.Before(crashAt) {
				continue
			}
			total := 0
			for _, n := range s.Conns[cl.name] {
				total += n
			}
			if fair := float64(total) / float64(readersAfterJoin); fair > 0 && float64(s.Conns[cl.name][added]) >= 0.8*fair {
				v := ms(s.at.Sub(joined))
				cr.NewReader80pctMS = &v
				break
			}
		}
		// The crash.
		resume := time.Duration(0)
		resumed := true
		for _, recs := range cl.recs {
			from := crashAt
			for _, r := range recs {
				if r.err != "" && !r.start.Before(crashAt) {
					cr.FailedAtCrash++
					if !r.start.Before(crashDone) {
						cr.FailedBeyondInFlight++
					}
					from = r.end
				}
				// A read that started before the crash and failed after it.
				if r.err != "" && r.start.Before(crashAt) && r.end.After(crashAt) {
					cr.FailedAtCrash++
					from = r.end
				}
			}
			var back time.Time
			for _, r := range recs {
				if r.err == "" && !r.start.Before(from) {
					back = r.end
					break
				}
			}
			if back.IsZero() {
				resumed = false
				continue
			}
			resume = max(resume, back.Sub(crashAt))
		}
		if resumed {
			v := ms(resume)
			cr.ResumeAfterCrashMS = &v
		}
		// The lag.
		for _, r := range all {
			if r.err != "" || r.server != lagging || r.start.Before(lagAt) {
				continue
			}
			cr.LaggingReadsAll++
			if !r.start.Before(cutoff) {
				cr.LaggingReads++
			}
		}
		// Per phase.
		for _, p := range phases {
			pf := PhaseFigures{Phase: p.Name, Reads: map[string]int{}, Connections: map[string]int{}}
			for _, r := range all {
				if r.start.Before(p.start) || !r.start.Before(p.end) {
					continue
				}
				if r.err != "" {
					pf.Failed++
				} else {
					pf.Reads[r.server]++
				}
			}
			for _, s := range res.Samples {
				if s.Phase == p.Name {
					pf.Connections = s.Conns[cl.name]
				}
			}
			cr.PerPhase = append(cr.PerPhase, pf)
		}
		res.Clients = append(res.Clients, cr)
	}
	res.goals()
	return res, nil
}

// goals checks the targets on holdfast's figures.
func (r *Result) goals() {
	hf := r.Clients[1]
	g := &r.Goals
	g.SpreadAtMost125 = hf.ReaderConnectionsMaxMin != nil && *hf.ReaderConnectionsMaxMin <= 1.25
	g.NewReaderAtLeast80pct = hf.NewReaderShare >= 0.8
	g.ResumeWithin1s = hf.ResumeAfterCrashMS != nil && *hf.ResumeAfterCrashMS <= 1000
	g.NoFailedBeyondFlight = hf.FailedBeyondInFlight == 0
	g.NoLaggingReads = hf.LaggingReads == 0
	g.Met = g.SpreadAtMost125 && g.NewReaderAtLeast80pct && g.ResumeWithin1s && g.NoFailedBeyondFlight && g.NoLaggingReads
}

// sampler samples the connections per reader per client, over one
// connection per reader of its own (user postgres, not counted).
type sampler struct {
	c       *failovertest.Cluster
	users   []string
	conns   map[string]*pgx.Conn
	mu      sync.Mutex
	samples []Sample
	downs   map[string]bool // readers crashed: not asked
}

func newSampler(c *failovertest.Cluster, clients []*client) *sampler {
	s := &sampler{c: c, conns: map[string]*pgx.Conn{}, downs: map[string]bool{}}
	for _, cl := range clients {
		s.users = append(s.users, cl.name)
	}
	return s
}

// down marks reader id as down: it is not asked any more.
func (s *sampler) down(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downs[id] = true
}

// last returns the last sample.
func (s *sampler) last() (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return Sample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

// run samples every interval until done is closed.
func (s *sampler) run(ctx context.Context, phase *atomic.Value, interval time.Duration, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.sample(ctx, phase.Load().(string))
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// countConns counts the pools' connections per role on a server: client
// backends of the clients' roles, but for holdfast's monitor connection
// (application_name holdfast-failover-monitor), which is not the pool's.
const countConns = `SELECT usename::text, count(*) FROM pg_stat_activity
	WHERE backend_type = 'client backend' AND usename = ANY($1)
	AND application_name IS DISTINCT FROM 'holdfast-failover-monitor' GROUP BY usename`

func (s *sampler) sample(ctx context.Context, phase string) {
	at := time.Now()
	sm := Sample{Phase: phase, Conns: map[string]map[string]int{}, at: at}
	for _, u := range s.users {
		sm.Conns[u] = map[string]int{}
	}
	s.mu.Lock()
	downs := maps.Clone(s.downs)
	s.mu.Unlock()
	for _, id := range s.c.Readers() {
		if downs[id] {
			continue
		}
		counts, err := s.count(ctx, id)
		if err != nil {
			continue
		}
		for _, u := range s.users {
			sm.Conns[u][id] = counts[u]
		}
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
}

// count asks reader id for the users' connections.
func (s *sampler) count(ctx context.Context, id string) (map[string]int, error) {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn := s.conns[id]
	if conn == nil {
		var err error
		if conn, err = pgx.Connect(qctx, s.c.DSN(s.c.Addr(id), "connect_timeout=1")); err != nil {
			return nil, err
		}
		s.conns[id] = conn
	}
	out, err := countWith(qctx, conn, s.users)
	if err != nil {
		conn.Close(context.Background())
		delete(s.conns, id)
		return nil, err
	}
	return out, nil
}

// countWith runs countConns on conn.
func countWith(ctx context.Context, conn *pgx.Conn, users []string) (map[string]int, error) {
	rows, err := conn.Query(ctx, countConns, users)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var u string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&u, &n}, func() error { out[u] = n; return nil })
	return out, err
}

// countOn counts the users' connections on reader id, over a connection
// of its own.
func countOn(ctx context.Context, c *failovertest.Cluster, id string, users []string) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(id), "connect_timeout=5"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	defer conn.Close(context.Background())
	return countWith(ctx, conn, users)
}

func (s *sampler) close() {
	for id, conn := range s.conns {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(ctx)
		cancel()
		delete(s.conns, id)
	}
}

// syncWriter serialises the writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// printProgress prints a line per second until done is closed.
func printProgress(w io.Writer, begin time.Time, clients []*client, smp *sampler, phase *atomic.Value, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := make([][2]int64, len(clients))
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%5.1fs  %-6s", time.Since(begin).Seconds(), phase.Load().(string))
		s, _ := smp.last()
		for i, c := range clients {
			ok, failed := c.ok.Load(), c.failed.Load()
			fmt.Fprintf(&b, " | %-8s ok %4d fail %3d conns %s", c.name, ok-last[i][0], failed-last[i][1], perReader(s.Conns[c.name]))
			last[i] = [2]int64{ok, failed}
		}
		fmt.Fprintln(w, b.String())
	}
}

// perReader formats connections per reader, in reader order: "4/4/4".
func perReader(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sortIDs(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(m[id])
	}
	return strings.Join(parts, "/")
}

// sortIDs sorts server ids by their number ("orders-10" after "orders-9").
func sortIDs(ids []string) {
	sort.Slice(ids, func(i, j int) bool {
		if len(ids[i]) != len(ids[j]) {
			return len(ids[i]) < len(ids[j])
		}
		return ids[i] < ids[j]
	})
}

// print writes the per-phase view, the side-by-side table, the goals and
// the legend.
func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "\nreaders: %d at the start, %s added, %s crashed, %s lagging %.0f ms; pools of %d, %d workers each; "+
		"holdfast RefreshInterval %.0f ms, MaxLag %.0f ms; client DNS TTL %.0f ms\n",
		r.ReadersAtStart, r.AddedReader, r.CrashedReader, r.LaggingReader, r.LagMS, r.PoolSize, r.Workers, r.RefreshMS, r.MaxLagMS, r.DNSTTLMS)
	fmt.Fprintf(w, "\nper phase (connections per reader at its end; reads per server):\n")
	for i, p := range r.Phases {
		fmt.Fprintf(w, "  %-6s %6.1f–%5.1f s\n", p.Name, p.StartMS/1000, p.EndMS/1000)
		for _, c := range r.Clients {
			pf := c.PerPhase[i]
			fmt.Fprintf(w, "    %-8s connections %-14s reads %s, %d failed\n", c.Name, labelled(pf.Connections), labelled(pf.Reads), pf.Failed)
		}
	}
	fmt.Fprintln(w)
	row := func(label string, v func(ClientResult) string) {
		fmt.Fprintf(w, "%-36s", label)
		for _, c := range r.Clients {
			fmt.Fprintf(w, " %14s", v(c))
		}
		fmt.Fprintln(w)
	}
	row("", func(c ClientResult) string { return c.Name })
	row("requests", func(c ClientResult) string { return fmt.Sprint(c.Requests) })
	row("failed", func(c ClientResult) string { return fmt.Sprint(c.Failed) })
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
	row("reader connections max/min (steady)", func(c ClientResult) string {
		if c.ReaderConnectionsMaxMin == nil {
			return fmt.Sprintf("∞ (%d/%d)", c.ReaderConnectionsMax, c.ReaderConnectionsMin)
		}
		return fmt.Sprintf("%.2f", *c.ReaderConnectionsMaxMin)
	})
	row(fmt.Sprintf("new reader share (%.0f s after join)", r.JoinWaitMS/1000), func(c ClientResult) string {
		return fmt.Sprintf("%.0f%% (%d/%.1f)", 100*c.NewReaderShare, c.NewReaderConnections, c.NewReaderFairShare)
	})
	row("  80 % of fair share after (ms)", func(c ClientResult) string { return optMS(c.NewReader80pctMS) })
	row("resume after crash (ms)", func(c ClientResult) string { return optMS(c.ResumeAfterCrashMS) })
	row("  failed at the crash", func(c ClientResult) string { return fmt.Sprint(c.FailedAtCrash) })
	row("  of them beyond those in flight", func(c ClientResult) string { return fmt.Sprint(c.FailedBeyondInFlight) })
	row(fmt.Sprintf("lagging reads (after %.0f ms)", r.LagCutoffAfterMS), func(c ClientResult) string { return fmt.Sprint(c.LaggingReads) })
	row("  lagging reads from the lag on", func(c ClientResult) string { return fmt.Sprint(c.LaggingReadsAll) })

	yes := func(b bool) string {
		if b {
			return "met"
		}
		return "NOT MET"
	}
	g, hf := r.Goals, r.Clients[1]
	fmt.Fprintf(w, "\ngoals (holdfast):\n")
	fmt.Fprintf(w, "  reader connections max/min ≤ 1.25 (steady)            %s\n", yes(g.SpreadAtMost125))
	fmt.Fprintf(w, "  added reader ≥ 80%% of its fair share within %2.0f s     %s (%.0f%%)\n", r.JoinWaitMS/1000, yes(g.NewReaderAtLeast80pct), 100*hf.NewReaderShare)
	fmt.Fprintf(w, "  reads resume ≤ 1 s after a reader crash               %s (%s ms)\n", yes(g.ResumeWithin1s), optMS(hf.ResumeAfterCrashMS))
	fmt.Fprintf(w, "  no failed read beyond those in flight at the crash    %s (%d)\n", yes(g.NoFailedBeyondFlight), hf.FailedBeyondInFlight)
	fmt.Fprintf(w, "  no read from the lagging reader after MaxLag+refresh  %s (%d)\n", yes(g.NoLaggingReads), hf.LaggingReads)
	fmt.Fprint(w, `
legend:
progress lines: reads that succeeded and failed in that second per client, and its
  connections per reader (the last sample, in reader order; a crashed reader left out).
per phase: reads per server follow pgxpool's choice of an idle connection (the one
  released last), not only the connections' spread: with fewer workers than
  connections, a few connections serve most reads.
reader connections max/min: over the steady phase's samples (every 250 ms, each
  client's role in pg_stat_activity of each reader), the largest ratio of the most
  connections on a reader to the fewest; ∞ when a reader had none (most/fewest shown).
new reader share: the added reader's connections ÷ its fair share (the client's
  connections on the readers ÷ the readers), the join-wait after AddReader returned
  (the topology and the reader endpoint list it); "80 % of fair share after" is the
  first sample where it held 80 % of it.
resume after crash: from the crash (CrashReader called) until every worker reads
  again: each worker's first successful read after its last failed one (after the
  crash if none failed), up to the end of the run; "never" when one did not.
failed at the crash: reads that failed from the crash to the end of the run (those
  in flight at the crash included); beyond those in flight: those that started after
  CrashReader returned, when the reader was dead already.
lagging reads: successful reads answered by the lagging reader that started after
  SetLag was called + MaxLag + one RefreshInterval (holdfast's monitor has read the
  lag by then; the simulator publishes the lag in the topology at once). The refresh
  interval here is short; holdfast's default is 30 s.
`)
}

// labelled formats a map of server id to count: "orders-2 4, orders-3 4".
func labelled(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sortIDs(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s %d", id, m[id])
	}
	return strings.Join(parts, ", ")
}

func optMS(v *float64) string {
	if v == nil {
		return "never"
	}
	return fmt.Sprintf("%.0f", *v)
}

// describe names an error key for the table.
func describe(k string) string {
	names := map[string]string{
		"57P01": "57P01 terminated",
		"57P03": "57P03 cannot connect",
		"08006": "08006 connection failure",
	}
	if n, ok := names[k]; ok {
		return n
	}
	if len(k) > 33 {
		return k[:33]
	}
	return k
}

// serverList names each server and its address.
func serverList(c *failovertest.Cluster) string {
	var parts []string
	for _, id := range c.ServerIDs() {
		parts = append(parts, id+" "+c.Addr(id))
	}
	return strings.Join(parts, ", ")
}

// createRoles creates each client's login role on the writer and waits
// until every reader has replayed them: each client's connections are
// counted by its role.
func createRoles(ctx context.Context, c *failovertest.Cluster, clients []*client) error {
	w, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
	if err != nil {
		return err
	}
	defer w.Close(context.Background())
	var names []string
	for _, cl := range clients {
		if _, err := w.Exec(ctx, "CREATE ROLE "+pgx.Identifier{cl.name}.Sanitize()+" LOGIN SUPERUSER"); err != nil {
			return err
		}
		names = append(names, cl.name)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, id := range c.Readers() {
		for {
			n, err := rolesOn(wctx, c, id, names)
			if err == nil && n == len(names) {
				break
			}
			if err := sleepCtx(wctx, 50*time.Millisecond); err != nil {
				return fmt.Errorf("reader %s never replayed the roles: %w", id, err)
			}
		}
	}
	return nil
}

func rolesOn(ctx context.Context, c *failovertest.Cluster, id string, names []string) (int, error) {
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(id)))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)", names).Scan(&n)
	return n, err
}

// waitOpen waits until pool has n connections open (dials under way not
// counted), at most 30 s.
func waitOpen(ctx context.Context, pool *pgxpool.Pool, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	open := func() int32 { s := pool.Stat(); return s.IdleConns() + s.AcquiredConns() }
	for open() < int32(n) {
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("%d of %d connections open: %w", open(), n, err)
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
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
