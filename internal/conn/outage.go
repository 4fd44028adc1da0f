package conn

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/internal/outage"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// This file binds a pool's outage layer (internal/outage) to the engine:
// the prober's check, which connects through the pool's own dial as the
// monitors do, and the layer's reports, through the engine's telemetry.

// Outage configures the outage layer of every pool of an engine (the
// face's holdfast.Outage, checked and defaulted there).
type Outage struct {
	HoldFor time.Duration // > 0; negative: no wait
	// Wake, when set, is the wake of a database that pauses when idle
	// (the face's ServerlessV2).
	Wake *Wake
}

// Wake configures the pools of a database that pauses when idle (Aurora
// Serverless v2 at 0 ACU): the face's ServerlessV2, checked and defaulted
// there.
type Wake struct {
	// For bounds a wake: the one dial into a cold pool, its retries and
	// every connect's wait for it (outage.Config.WakeFor).
	For time.Duration
	// IdleFor is the pool's MaxConnIdleTime at most, and its
	// HealthCheckPeriod at most IdleFor/4: an idle pool holds no
	// connection within 1.25 IdleFor. The pool's MinConns and
	// MinIdleConns are set to 0.
	IdleFor time.Duration
}

// applyWake makes cfg's pool let its connections go when idle (w.IdleFor).
func applyWake(cfg *pgxpool.Config, w *Wake) {
	cfg.MinConns, cfg.MinIdleConns = 0, 0
	if cfg.MaxConnIdleTime <= 0 || cfg.MaxConnIdleTime > w.IdleFor {
		cfg.MaxConnIdleTime = w.IdleFor
	}
	if every := max(w.IdleFor/4, 10*time.Millisecond); cfg.HealthCheckPeriod <= 0 || cfg.HealthCheckPeriod > every {
		cfg.HealthCheckPeriod = every
	}
}

// cold reports whether the pool holds no established connection (idle or
// acquired): a connect now may find its database paused.
func (p *Pool) cold() bool {
	pool := p.comp.Pool()
	if pool == nil {
		return false
	}
	st := pool.Stat()
	return st.AcquiredConns()+st.IdleConns() == 0
}

// probeApp is the application_name of the prober's connections.
const probeApp = "holdfast-outage-probe"

// defaultProbeTimeout bounds a check when the retry policy has no
// AttemptTimeout.
const defaultProbeTimeout = 10 * time.Second

// addOutage adds the outage layer of the pool of cc (a copy of its config,
// before the composition). e.mu is held.
func (p *Pool) addOutage(cc *pgx.ConnConfig) {
	e := p.e
	timeout := e.cn.perTry
	if timeout <= 0 {
		timeout = defaultProbeTimeout
	}
	role := outage.RoleOf(&cc.Config)
	var readerWhile func() bool
	switch {
	case p.fo == nil:
	case p.fo.Readers():
		// Failover routing's reader pool (its readers are the monitor's):
		// not meant for the writer.
		role = outage.RoleReader
	case p.fo.Pinned():
		// A pool kept on its instance whatever its role, while the
		// cluster publishes a topology (the instance turning reader is
		// the monitor's to tell); without one, failover routing is off,
		// and the pool's role is checked here as without WithFailover.
		readerWhile = p.fo.Keeping
	}
	lookup := cc.LookupFunc
	if lookup == nil {
		// A resolver that caches nothing: the system's may (nscd,
		// systemd-resolved), and a check must see a moved name at once.
		lookup = (&net.Resolver{PreferGo: true}).LookupHost
	}
	probe := topology.MonitorConfig(cc, probeApp, timeout)
	report := &outageReport{o: e.tel.Outage(p.target)}
	var wakeFor time.Duration
	if w := e.cfg.Outage.Wake; w != nil {
		wakeFor = w.For
	}
	p.out = outage.New(outage.Config{
		HoldFor:     e.cfg.Outage.HoldFor,
		WakeFor:     wakeFor,
		Cold:        p.cold,
		Host:        cc.Host,
		Role:        role,
		ReaderWhile: readerWhile,
		Lookup:      lookup,
		Probe: func(ctx context.Context, l pgconn.LookupFunc) (*pgconn.PgConn, []string, error) {
			return p.probe(ctx, probe, l)
		},
		ProbeTimeout: timeout,
		// A held connect is the check while the database is down: the
		// connection it makes at "back" is the pool's, with no handshake
		// of the prober's before it.
		Lead:      true,
		Classify:  e.cfg.Classifier.Classify,
		DownError: func(d outage.Down) error { return e.cfg.Errors.Down(d, p.name) },
		Report:    report,
		Comp:      p.comp,
	})
	report.holdFor = e.cfg.Outage.HoldFor
	p.comp.Add(compose.Outage, p.out.Layer())
}

// probe is one check of the outage layer's prober: one connect to the
// pool's target with a copy of tmpl (the pool's config, without its
// hooks), hosts resolved by lookup, through the pool's own dial (an
// integration's, the config's DialFunc, pgx's; its TLS; the engine's
// password or token for the host), each dial made once: the prober's
// pace is its retry. It returns the addresses it dialed.
func (p *Pool) probe(ctx context.Context, tmpl *pgx.ConnConfig, lookup pgconn.LookupFunc) (*pgconn.PgConn, []string, error) {
	cc := tmpl.Copy()
	cc.LookupFunc = lookup
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > cc.ConnectTimeout {
		// A wake's check (outage.Config.WakeFor): its one dial may wait
		// for the resume, past the per-attempt bound.
		cc.ConnectTimeout = time.Until(dl)
	}
	var dialed []string // pgconn dials one address at a time
	base := p.base
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		conn, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tuneSocket(conn)
		return conn, nil
	}
	if err := p.monitorConnectWith(ctx, cc, nil, fetchOnce); err != nil {
		// The token source's failure, not the database's: one fetch a
		// check, the prober's pace its retry.
		return nil, dialed, &outage.CredentialsError{Err: p.e.cn.redact(err)}
	}
	pc, err := pgconn.ConnectConfig(ctx, &cc.Config)
	if err != nil {
		if p.e.cn.credentialsFailure(err) {
			// The integration's dialer could not get a token or a
			// certificate: the token source's failure.
			return nil, dialed, &outage.CredentialsError{Err: p.e.cn.redact(err)}
		}
		return nil, dialed, p.e.cn.redact(err)
	}
	return pc, dialed, nil
}

// outageReport records a pool's outages through the engine's telemetry.
type outageReport struct {
	o       *obs.Outage
	holdFor time.Duration
	token   atomic.Bool // the outage under way is the token source's (set at Down, read at Back: the prober's, in turn)
}

func (r *outageReport) Down(cause error, v classify.Verdict, addr string) {
	hint := "requests that need a new connection wait for it up to " + r.holdFor.String() + " (WithOutage's HoldFor) and their own deadline; it is checked with backoff"
	if r.holdFor < 0 {
		hint = "requests that need a new connection fail at once with ErrDatabaseDown while it is down (WithOutage's HoldFor is negative); it is checked with backoff"
	}
	token := outage.TokenSource(cause)
	if token {
		// The database may well be up: say where to look.
		hint = "no new connection can be made: its token or certificate cannot be fetched (the password function, or the connector's token and Admin API calls); the database may be up, and the pool's open connections still serve. Check the token source (the IAM token API, the Admin API, their quotas, the network to them); " + hint
	}
	r.token.Store(token)
	r.o.Down(cause, v, addr, hint, token)
}

func (r *outageReport) Back(downtime time.Duration, addr string, moved []string) {
	r.o.Back(downtime, addr, moved, r.token.Load())
}

func (r *outageReport) Woke(took time.Duration, addr string) { r.o.Woke(took, addr) }

// Outage returns the pool's outage layer, nil when it is off.
func (p *Pool) Outage() *outage.Layer {
	if p == nil {
		return nil
	}
	return p.out
}
