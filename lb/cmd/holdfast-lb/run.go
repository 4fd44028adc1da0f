package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10"
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/notify"
)

// Exit codes.
const (
	exitOK         = 0 // done
	exitNotDrained = 1 // a drain ended with connections left: abort the deploy
	exitUsage      = 2 // bad command line, configuration or request
	exitRefused    = 3 // not permitted, or the group is locked by someone else
	exitFailed     = 4 // balancer, database or state error, or interrupted
	exitCommand    = 5 // deploy: the deploy command failed
)

const usageText = `Usage: holdfast-lb [-config FILE] [-operator NAME] COMMAND [flags] GROUP

Drains and controls groups of load-balancer members (F5 BIG-IP, A10 ACOS).

Commands:
  status GROUP          each member's status (Enabled/Disabling/Disabled),
                        connections, and the group's lock holder
  enable GROUP          accept new connections again (after the deploy)
  disable GROUP         no new connections; persistent ones still served
  forced-offline GROUP  no new connections at all; do not wait
  drain GROUP           forced-offline, then wait until no connection is
                        left; exit 1 if some remain at the timeout
  check-config          validate the configuration file and exit
  serve                 the web console (and its JSON API, /metrics)
  deploy GROUP -- COMMAND [ARGS]
                        silence the group's alerts, drain it to zero
                        connections, run COMMAND, enable it again, expire
                        the silence; the group's lock held throughout
  version               the version of this program

Global flags:
  -config FILE     configuration (default $HOLDFAST_LB_CONFIG)
  -operator NAME   who you are, checked against the permissions
                   (default $HOLDFAST_LB_OPERATOR, then $USER); asserted,
                   not authenticated: the audit records beside it how it
                   was given, the OS user and the CI's identity variables

Command flags:
  -node NAME             act on this node of the group only (repeatable)
  -interval D            drain: time between polls (default from config, 1s;
                         at least 100ms)
  -timeout D             drain: give up after D (default from config, 2m;
                         at most 1h)
  -concurrency N         members driven at once (default from config, 8)
  -restore-on-failure    drain: put members back as they were if it fails

Deploy flags (and -node, -interval, -timeout, -concurrency,
-restore-on-failure):
  -lock-wait D                wait up to D for a group someone else holds
  -silence D                  silence for at most D (default and bound:
                              alertmanager.max_duration, 1h)
  -silence-optional           go on without a silence if Alertmanager fails
  -leave-offline-on-failure   if COMMAND fails, leave the members forced
                              offline instead of enabling them again

Serve flags:
  -listen ADDR           address to listen on (default 127.0.0.1:8080)
  -operator-header H     the header the authenticating proxy sets to the
                         signed-in user, e.g. X-Forwarded-User
  -trusted-proxy CIDR    addresses whose -operator-header is trusted
                         (repeatable; default loopback)
  -poll D                how often the members are read (default 2s; at
                         least 100ms)
  -refresh D             how often the page reloads (default -poll)
  With -operator NAME instead of -operator-header, every request is NAME
  (a console on your own machine); with neither, the console is read-only.

Exit codes:
  0  done
  1  not drained: connections remained at the timeout; abort the deploy
  2  usage or configuration error
  3  refused: not permitted, or the group is locked by someone else
  4  failed: balancer, database, Alertmanager or state error, or interrupted
  5  deploy: COMMAND failed (the group is enabled again, or left forced
     offline with -leave-offline-on-failure)
`

// run is the whole program, callable from tests.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	r := &runner{getenv: getenv}
	r.stdout = &redactingWriter{w: stdout, secrets: r.secretList}
	r.stderr = &redactingWriter{w: stderr, secrets: r.secretList}
	defer r.close()
	return r.main(ctx, args)
}

type runner struct {
	getenv         func(string) string
	stdout, stderr io.Writer

	mu         sync.Mutex
	secrets    []string
	transports []*http.Transport
}

func (r *runner) secretList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.secrets...)
}

func (r *runner) addSecret(s string) {
	if s == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = append(r.secrets, s)
}

func (r *runner) close() {
	for _, t := range r.transports {
		t.CloseIdleConnections()
	}
}

func (r *runner) errorf(code int, format string, a ...any) int {
	fmt.Fprintf(r.stderr, "holdfast-lb: "+format+"\n", a...)
	return code
}

type cmdFlags struct {
	nodes       []string
	interval    time.Duration
	timeout     time.Duration
	concurrency int
	restore     bool

	// serve
	listen         string
	operatorHeader string
	trustedProxies []string
	poll           time.Duration
	refresh        time.Duration

	// deploy
	leaveOffline    bool
	lockWait        time.Duration
	silenceFor      time.Duration
	silenceOptional bool
	command         []string
}

func (r *runner) main(ctx context.Context, args []string) int {
	gfs := flag.NewFlagSet("holdfast-lb", flag.ContinueOnError)
	gfs.SetOutput(io.Discard)
	configPath := gfs.String("config", r.getenv("HOLDFAST_LB_CONFIG"), "")
	operator := gfs.String("operator", "", "")
	if err := gfs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(r.stdout, usageText)
			return exitOK
		}
		fmt.Fprint(r.stderr, usageText)
		return r.errorf(exitUsage, "%v", err)
	}
	if gfs.NArg() == 0 {
		fmt.Fprint(r.stderr, usageText)
		return r.errorf(exitUsage, "no command")
	}
	command := gfs.Arg(0)
	if command == "help" {
		fmt.Fprint(r.stdout, usageText)
		return exitOK
	}
	var action lb.Action
	switch command {
	case "status", "check-config", "serve", "deploy", "version":
	case "enable":
		action = lb.ActionEnable
	case "disable":
		action = lb.ActionDisable
	case "forced-offline":
		action = lb.ActionForcedOffline
	case "drain":
		action = lb.ActionDrain
	default:
		return r.errorf(exitUsage, "unknown command %q (try holdfast-lb help)", command)
	}

	var cf cmdFlags
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if command == "serve" {
		fs.StringVar(&cf.listen, "listen", "127.0.0.1:8080", "")
		fs.StringVar(&cf.operatorHeader, "operator-header", "", "")
		fs.Func("trusted-proxy", "", func(s string) error { cf.trustedProxies = append(cf.trustedProxies, s); return nil })
		fs.DurationVar(&cf.poll, "poll", 0, "")
		fs.DurationVar(&cf.refresh, "refresh", 0, "")
	} else {
		fs.Func("node", "", func(s string) error { cf.nodes = append(cf.nodes, s); return nil })
		fs.BoolVar(&cf.restore, "restore-on-failure", false, "")
	}
	rest := gfs.Args()[1:]
	if command == "deploy" {
		fs.BoolVar(&cf.leaveOffline, "leave-offline-on-failure", false, "")
		fs.DurationVar(&cf.lockWait, "lock-wait", 0, "")
		fs.DurationVar(&cf.silenceFor, "silence", 0, "")
		fs.BoolVar(&cf.silenceOptional, "silence-optional", false, "")
		i := slices.Index(rest, "--")
		if i < 0 {
			return r.errorf(exitUsage, "deploy: want GROUP -- COMMAND [ARGS]")
		}
		rest, cf.command = rest[:i], rest[i+1:]
		if len(cf.command) == 0 {
			return r.errorf(exitUsage, "deploy: no command after --")
		}
	}
	fs.DurationVar(&cf.interval, "interval", 0, "")
	fs.DurationVar(&cf.timeout, "timeout", 0, "")
	fs.IntVar(&cf.concurrency, "concurrency", 0, "")
	if command == "version" {
		fmt.Fprintln(r.stdout, versionText())
		return exitOK
	}
	if err := fs.Parse(rest); err != nil {
		return r.errorf(exitUsage, "%s: %v", command, err)
	}
	if cf.interval < 0 || cf.timeout < 0 || cf.concurrency < 0 || cf.poll < 0 || cf.refresh < 0 || cf.lockWait < 0 || cf.silenceFor < 0 {
		return r.errorf(exitUsage, "%s: durations and -concurrency must not be negative", command)
	}
	if err := flagBounds(cf); err != nil {
		return r.errorf(exitUsage, "%s: %v", command, err)
	}

	if *configPath == "" {
		return r.errorf(exitUsage, "no configuration: use -config FILE or set HOLDFAST_LB_CONFIG")
	}
	cfg, err := lb.LoadConfig(*configPath)
	if err != nil {
		return r.errorf(exitUsage, "%s: %v", *configPath, err)
	}
	if command == "check-config" {
		if fs.NArg() != 0 {
			return r.errorf(exitUsage, "check-config takes no argument")
		}
		fmt.Fprintf(r.stdout, "%s: ok: %d balancers, %d groups, %d operators\n", *configPath, len(cfg.Balancers), len(cfg.Groups), len(cfg.Operators))
		return exitOK
	}
	if command == "serve" {
		if fs.NArg() != 0 {
			return r.errorf(exitUsage, "serve takes no argument")
		}
		return r.serve(ctx, cfg, cf, *operator)
	}
	if fs.NArg() != 1 {
		return r.errorf(exitUsage, "%s: want exactly one GROUP (got %d arguments)", command, fs.NArg())
	}
	group := fs.Arg(0)
	if _, ok := cfg.Groups[group]; !ok {
		return r.errorf(exitUsage, "%s: unknown group %q", command, group)
	}

	// The operator is asserted: whoever runs the command names it. The
	// audit records how, and the OS user and CI identity beside it.
	op, via := *operator, "-operator"
	if op == "" {
		op, via = r.getenv("HOLDFAST_LB_OPERATOR"), "$HOLDFAST_LB_OPERATOR"
	}
	if op == "" {
		op, via = r.getenv("USER"), "$USER"
	}
	if op == "" && command != "status" {
		return r.errorf(exitUsage, "no operator: use -operator NAME or set HOLDFAST_LB_OPERATOR")
	}

	su, code := r.prepare(ctx, cfg, cf)
	if su == nil {
		return code
	}
	defer su.close()
	ctrl, err := su.controller()
	if err != nil {
		return r.errorf(exitUsage, "%v", err)
	}
	if command == "status" {
		return r.status(ctx, ctrl, group, cf.nodes)
	}
	if command == "deploy" {
		return r.deploy(ctx, su, ctrl, op, via, group, cf)
	}
	return r.control(ctx, ctrl, lb.Request{Operator: op, OperatorVia: via, Action: action, Group: group, Nodes: cf.nodes, RestoreOnFailure: cf.restore})
}

// minPoll bounds serve -poll from below, as lb.MinDrainInterval bounds
// the drain's interval: each poll reads every member of every group.
const minPoll = lb.MinDrainInterval

// flagBounds applies the configuration's bounds to the flags that
// override it: -interval (lb.MinDrainInterval), -timeout
// (lb.MaxDrainTimeout) and -poll (minPoll). 0 means unset.
func flagBounds(cf cmdFlags) error {
	switch {
	case cf.interval != 0 && cf.interval < lb.MinDrainInterval:
		return &lb.ConfigError{Pkg: "holdfast-lb", Field: "-interval", Why: "must be at least " + lb.MinDrainInterval.String() + ", got " + cf.interval.String()}
	case cf.timeout > lb.MaxDrainTimeout:
		return &lb.ConfigError{Pkg: "holdfast-lb", Field: "-timeout", Why: "must be at most " + lb.MaxDrainTimeout.String() + ", got " + cf.timeout.String()}
	case cf.poll != 0 && cf.poll < minPoll:
		return &lb.ConfigError{Pkg: "holdfast-lb", Field: "-poll", Why: "must be at least " + minPoll.String() + ", got " + cf.poll.String()}
	}
	return nil
}

// setup is what every command but check-config builds from the
// configuration: the database store, one HTTP client per balancer, and
// the drain settings.
type setup struct {
	cfg        *lb.Config
	pool       *pgxpool.Pool
	store      *lb.PGStore
	clients    map[string]*http.Client
	passwords  map[string]lb.Secret
	notes      map[string]string // balancer → its TransportWarning
	origin     lb.Origin
	drain      lb.DrainConfig
	conc       int
	logger     *slog.Logger
	notifier   lb.Notifier
	dispatcher *notify.Dispatcher
	metrics    *lb.Metrics
}

// notifyFlush bounds how long a command waits, at its end, for its
// notifications to be delivered.
const notifyFlush = 30 * time.Second

// prepare builds the setup; its cleanup closes the pool.
func (r *runner) prepare(ctx context.Context, cfg *lb.Config, cf cmdFlags) (*setup, int) {
	s := &setup{cfg: cfg, clients: map[string]*http.Client{}, passwords: map[string]lb.Secret{}, notes: map[string]string{},
		origin: lb.ProcessOrigin(r.getenv), logger: slog.New(slog.NewJSONHandler(r.stderr, nil))}
	for _, name := range slices.Sorted(maps.Keys(cfg.Balancers)) {
		bc := cfg.Balancers[name]
		if w := bc.TransportWarning(); w != "" {
			s.notes[name] = w
			s.logger.WarnContext(ctx, "lb balancer transport is not secure", slog.String("balancer", name), slog.String("endpoint", bc.Endpoint), slog.String("warning", w))
		}
		pw, err := bc.ResolvePassword(r.getenv)
		if err != nil {
			return nil, r.errorf(exitUsage, "balancer %s: %v", name, err)
		}
		r.addSecret(pw.Reveal())
		hc, err := r.httpClient(bc)
		if err != nil {
			return nil, r.errorf(exitUsage, "balancer %s: %v", name, err)
		}
		s.clients[name], s.passwords[name] = hc, pw
	}
	if _, err := s.balancers(); err != nil {
		return nil, r.errorf(exitUsage, "%v", err)
	}
	dsn, err := cfg.Database.ResolveDSN(r.getenv)
	if err != nil {
		return nil, r.errorf(exitUsage, "%v", err)
	}
	r.addSecret(dsn.Reveal())
	if pc, err := pgx.ParseConfig(dsn.Reveal()); err == nil {
		r.addSecret(pc.Password)
	}
	pool, err := pgxpool.New(ctx, dsn.Reveal())
	if err != nil {
		return nil, r.errorf(exitUsage, "database: %v", err)
	}
	s.store, err = lb.NewPGStore(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, r.errorf(exitFailed, "%v", err)
	}
	s.pool = pool
	if len(cfg.Notify.Webhooks) > 0 {
		hooks, err := notify.FromSettings(cfg.Notify, r.getenv)
		if err != nil {
			s.close()
			return nil, r.errorf(exitUsage, "%v", err)
		}
		for _, h := range hooks {
			r.addSecret(h.URL.Reveal())
		}
		d, err := notify.New(notify.Config{Webhooks: hooks, Logger: s.logger})
		if err != nil {
			s.close()
			return nil, r.errorf(exitUsage, "%v", err)
		}
		s.notifier, s.dispatcher = d, d
	}
	s.drain = lb.DrainConfig{Interval: time.Duration(cfg.Drain.Interval), Timeout: time.Duration(cfg.Drain.Timeout)}
	if cf.interval > 0 {
		s.drain.Interval = cf.interval
	}
	if cf.timeout > 0 {
		s.drain.Timeout = cf.timeout
	}
	s.conc = cfg.Drain.Concurrency
	if cf.concurrency > 0 {
		s.conc = cf.concurrency
	}
	return s, exitOK
}

func (s *setup) close() {
	if s.dispatcher != nil {
		ctx, cancel := context.WithTimeout(context.Background(), notifyFlush)
		_ = s.dispatcher.Close(ctx)
		cancel()
	}
	if s.pool != nil {
		s.pool.Close()
	}
}

// balancers builds a fresh adapter for every balancer (each with its own
// session), on the balancer's shared HTTP client.
func (s *setup) balancers() (map[string]lb.Balancer, error) {
	out := map[string]lb.Balancer{}
	for _, name := range slices.Sorted(maps.Keys(s.cfg.Balancers)) {
		bc := s.cfg.Balancers[name]
		var (
			b   lb.Balancer
			err error
		)
		switch bc.Vendor {
		case lb.VendorF5:
			b, err = f5.New(f5.Config{Endpoint: bc.Endpoint, Username: bc.Username, Password: s.passwords[name], Partition: bc.Partition, TokenTimeout: time.Duration(bc.TokenTimeout), AllowInsecureHTTP: bc.AllowInsecureHTTP, HTTPClient: s.clients[name]})
		case lb.VendorA10:
			b, err = a10.New(a10.Config{Endpoint: bc.Endpoint, Username: bc.Username, Password: s.passwords[name], Partition: bc.Partition, AllowInsecureHTTP: bc.AllowInsecureHTTP, HTTPClient: s.clients[name]})
		default:
			err = errors.New("unknown vendor " + strconv.Quote(bc.Vendor))
		}
		if err != nil {
			return nil, fmt.Errorf("balancer %s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}

// controller builds a Controller with adapters of its own.
func (s *setup) controller() (*lb.Controller, error) {
	bs, err := s.balancers()
	if err != nil {
		return nil, err
	}
	return lb.NewController(lb.ControllerConfig{
		Balancers:      bs,
		Groups:         s.cfg.Groups,
		Permissions:    s.cfg.Operators,
		Locker:         s.store,
		Audit:          s.store,
		Logger:         s.logger,
		Drain:          s.drain,
		Concurrency:    s.conc,
		Notifier:       s.notifier,
		Metrics:        s.metrics,
		Origin:         s.origin,
		TransportNotes: s.notes,
	})
}

// httpClient builds one balancer's HTTP client.
func (r *runner) httpClient(bc lb.BalancerConfig) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: bc.InsecureSkipVerify}
	if bc.CAFile != "" {
		pem, err := os.ReadFile(bc.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, errors.New("ca_file: no PEM certificate in " + bc.CAFile)
		}
		tc.RootCAs = roots
	}
	tr.TLSClientConfig = tc
	r.mu.Lock()
	r.transports = append(r.transports, tr)
	r.mu.Unlock()
	timeout := time.Duration(bc.Timeout)
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}

func (r *runner) status(ctx context.Context, ctrl *lb.Controller, group string, nodes []string) int {
	gs, err := ctrl.Status(ctx, group, nodes...)
	if gs == nil {
		return r.errorf(exitUsage, "status: %v", err)
	}
	if gs.Holder != nil {
		fmt.Fprintf(r.stdout, "group %s: locked by %s\n", group, gs.Holder)
	} else {
		fmt.Fprintf(r.stdout, "group %s: not locked\n", group)
	}
	tw := tabwriter.NewWriter(r.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BALANCER\tMEMBER\tSTATUS\tADMIN\tCONNS\tAVAILABILITY\tERROR")
	for _, m := range gs.Members {
		conns := "-"
		switch {
		case m.StatsDisabled:
			conns = "stats off"
		case m.Conns >= 0:
			conns = strconv.FormatInt(m.Conns, 10)
		}
		e := ""
		if m.Err != nil {
			e = m.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Target.Balancer, m.Target.Member, m.Phase, m.State.Admin, conns, dash(m.State.Availability), e)
	}
	_ = tw.Flush()
	if err != nil {
		return r.errorf(exitFailed, "status: %v", err)
	}
	return exitOK
}

func (r *runner) control(ctx context.Context, ctrl *lb.Controller, req lb.Request) int {
	var progress *progressLine
	if req.Action == lb.ActionDrain {
		progress = newProgressLine(r.stderr, isTerminal(r.stderr))
		req.Progress = progress.update
	}
	out, err := ctrl.Do(ctx, req)
	if progress != nil {
		progress.end() // before the results are printed
	}
	e := out.Entry
	if len(out.Members) > 0 && e.Result != lb.ResultRefused && e.Result != lb.ResultLocked {
		tw := tabwriter.NewWriter(r.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BALANCER\tMEMBER\tBEFORE\tAFTER\tCONNS\tRESULT")
		for _, m := range out.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Target.Balancer, m.Target.Member, m.Result.Before.Admin, m.Result.After.Admin, connsText(m.Result), memberText(req.Action, m))
		}
		_ = tw.Flush()
	}
	audit := ""
	if e.ID != 0 {
		audit = fmt.Sprintf(" (audit #%d)", e.ID)
	}
	switch e.Result {
	case lb.ResultOK:
		fmt.Fprintf(r.stdout, "ok: %s %s: %d members in %s%s\n", req.Action, req.Group, len(out.Members), e.Duration.Round(time.Millisecond), audit)
		return exitOK
	case lb.ResultNotDrained:
		r.errorf(exitNotDrained, "NOT DRAINED: %v%s", err, audit)
		return r.errorf(exitNotDrained, "abort the deploy: connections remained on %s after the drain timeout", req.Group)
	case lb.ResultRefused, lb.ResultLocked:
		return r.errorf(exitRefused, "refused: %v%s", err, audit)
	case lb.ResultInvalid:
		return r.errorf(exitUsage, "%v%s", err, audit)
	}
	return r.errorf(exitFailed, "%s %s failed: %v%s", req.Action, req.Group, err, audit)
}

func connsText(res lb.DrainResult) string {
	if res.LastConns >= 0 {
		if res.BeforeConns >= 0 && res.BeforeConns != res.LastConns {
			return strconv.FormatInt(res.BeforeConns, 10) + " -> " + strconv.FormatInt(res.LastConns, 10)
		}
		return strconv.FormatInt(res.LastConns, 10)
	}
	if res.BeforeConns >= 0 {
		return strconv.FormatInt(res.BeforeConns, 10)
	}
	return "-"
}

func memberText(a lb.Action, m lb.MemberOutcome) string {
	switch {
	case errors.Is(m.Err, lb.ErrSkipped):
		return "skipped"
	case m.Err != nil:
		var nd *lb.NotDrainedError
		if errors.As(m.Err, &nd) {
			return "NOT DRAINED after " + nd.Elapsed.Round(time.Millisecond).String()
		}
		return "error: " + m.Err.Error()
	case a == lb.ActionDrain && m.Result.Drained:
		return fmt.Sprintf("drained in %s (%d polls)", m.Result.Elapsed.Round(time.Millisecond), m.Result.Polls)
	case !m.Changed:
		return "unchanged"
	}
	return "ok"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// progressLine prints the drain's progress: rewritten in place on a
// terminal, one line per change otherwise (for CI logs), plus a line every
// 10 seconds when nothing changes.
type progressLine struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	last     string
	lastAt   time.Time
	start    time.Time
	printed  bool
	interval time.Duration
}

func newProgressLine(w io.Writer, tty bool) *progressLine {
	return &progressLine{w: w, tty: tty, start: time.Now(), interval: 10 * time.Second}
}

func (p *progressLine) update(pr lb.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	note := ""
	if pr.Poll.Err != nil {
		note = " (a poll failed, retrying)"
	}
	state := fmt.Sprintf("drain %s: %d of %d members in use, %d current connections%s", pr.Group, pr.Remaining, pr.Total, pr.InUse, note)
	line := fmt.Sprintf("%s [%s of %s]", state, time.Since(p.start).Round(100*time.Millisecond), pr.Poll.Timeout)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.printed = true
		return
	}
	if state != p.last || time.Since(p.lastAt) >= p.interval {
		fmt.Fprintln(p.w, line)
		p.last, p.lastAt = state, time.Now()
	}
}

func (p *progressLine) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.printed {
		fmt.Fprintln(p.w)
	}
}

func isTerminal(w io.Writer) bool {
	if rw, ok := w.(*redactingWriter); ok {
		w = rw.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// redactingWriter removes secrets from everything written: a last line of
// defence, since errors and log lines are redacted where they are made.
type redactingWriter struct {
	w       io.Writer
	secrets func() []string
}

func (rw *redactingWriter) Write(b []byte) (int, error) {
	s := string(b)
	for _, sec := range rw.secrets() {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, lb.Redacted)
		}
	}
	if _, err := io.WriteString(rw.w, s); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (r *runner) printf(format string, a ...any) {
	fmt.Fprintf(r.stderr, format, a...)
}
