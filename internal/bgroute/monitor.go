package bgroute

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/bgroute/switchover"
	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/jackc/pgx/v5"
)

// monitor polls the metadata for one role on its own connection, outside
// the pool. It runs on one goroutine owned by the Router, and reads the
// server on a second one while it keeps resolving DNS (readWatching).
type monitor struct {
	r    *Router
	role meta.Role

	interval time.Duration // the polling interval the Router asked for last

	gen        uint64
	conn       *pgx.Conn
	engine     meta.Engine // detected metadata; EngineAuto: not (yet) found
	noArg      bool        // the metadata function takes no argument
	topology   bool        // read aurora_replica_status() on this connection
	target     string      // host to read from; "" = the pool's host
	targetPort uint16
	failures   int             // consecutive polls without a result
	connects   int             // connections opened
	retarget   bool            // the last poll moved to another host: poll again at once
	corrected  bool            // the host was corrected once in this generation
	warned     map[string]bool // what was logged once in this generation (at most maxWarned keys)
}

// idleCheck is how often an idle monitor (Options.Idle) asks whether its
// pool connected again.
const idleCheck = 200 * time.Millisecond

// maxWarned bounds the keys of monitor.warned: past it, nothing new is
// logged until the next generation.
const maxWarned = 100

func (m *monitor) run(ctx context.Context) {
	defer m.disconnect()
	for {
		gen, wake := m.r.generation()
		if gen != m.gen {
			m.reset(gen)
		}
		if m.r.idle != nil && m.r.idle() {
			// The pool holds no connection (Options.Idle): nor does the
			// monitor, and it reads again as soon as the pool connects.
			m.disconnect()
			m.r.resting(m.role)
			t := time.NewTimer(idleCheck)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-wake:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		o, ms := m.poll(ctx)
		if ctx.Err() != nil {
			return
		}
		interval, active := m.r.report(o, ms)
		m.interval = interval
		if o.Kind == switchover.KindNoConn || o.Kind == switchover.KindFailed {
			m.failures++
			interval = m.backoff(active)
		} else {
			m.failures = 0
		}
		if m.retarget {
			m.retarget = false
			continue
		}
		if !m.sleep(ctx, interval, wake) {
			return
		}
	}
}

// sleep waits interval, or until wake is closed, or, with Options.Idle,
// until the pool is idle (checked every idleCheck); false when ctx ended.
func (m *monitor) sleep(ctx context.Context, interval time.Duration, wake <-chan struct{}) bool {
	end := time.Now().Add(interval)
	for {
		d := time.Until(end)
		if m.r.idle != nil {
			d = min(d, idleCheck)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-wake:
			t.Stop()
			return true
		case <-t.C:
		}
		if !time.Now().Before(end) || (m.r.idle != nil && m.r.idle()) {
			return true
		}
	}
}

// backoff is the delay after a failed poll: HighInterval doubling per
// failure, at most HighInterval during a switchover and IncreasedInterval
// otherwise.
func (m *monitor) backoff(active bool) time.Duration {
	c := m.r.cfg
	limit := max(c.IncreasedInterval, c.HighInterval)
	if active {
		limit = c.HighInterval
	}
	d := c.HighInterval
	for i := 1; i < m.failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// reset starts over for a new generation: a new deployment is read from
// the pool's host.
func (m *monitor) reset(gen uint64) {
	m.disconnect()
	m.gen = gen
	m.engine = meta.EngineAuto
	m.target, m.targetPort = "", 0
	m.failures = 0
	m.corrected = false
	clear(m.warned) // keyed by row names: those of the last generation are forgotten
}

func (m *monitor) disconnect() {
	if m.conn == nil {
		return
	}
	topology.Close(m.conn)
	m.conn = nil
}

// poll makes one observation.
func (m *monitor) poll(ctx context.Context) (switchover.Observation, bluegreen.MonitorStatus) {
	o := switchover.Observation{Role: m.role, Gen: m.gen}
	ms := bluegreen.MonitorStatus{Role: m.role.String(), Host: m.host()}
	m.readWatching(ctx, &o, ms)
	ms.Connects = m.connects
	if m.conn != nil {
		ms.Connected = true
		ms.Addr = topology.RemoteIP(m.conn)
		ms.Topology = m.topology
	}
	ms.Observation = o.Kind.String()
	if o.Err != nil {
		// Through the engine's redactor, as every error text the Router
		// logs or reports: a password function's or a server's error may
		// carry a secret.
		ms.Error = m.r.redact(o.Err.Error())
		m.r.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "bluegreen: monitor poll failed",
			slog.String("bgd_id", m.r.cfg.ID), slog.String("role", m.role.String()),
			slog.String("observation", o.Kind.String()), slog.String("error", ms.Error))
	}
	if o.Kind == switchover.KindRows {
		ms.Status = o.View.Status
	}
	o.DNS = m.resolve(ctx, o.Learned())
	return o, ms
}

// readWatching runs m.read on a goroutine of its own, which it joins (and
// which the Router's Close joins too, within its bound). While the read
// has not returned, because the server swallows a connection attempt or a
// query (up to MonitorConnectTimeout or MonitorQueryTimeout), it resolves
// the role's hosts at the polling interval (HighInterval during a
// switchover) and reports them: a DNS change, "Blue DNS updated" above
// all, is seen on time even when the server no longer answers.
func (m *monitor) readWatching(ctx context.Context, o *switchover.Observation, ms bluegreen.MonitorStatus) {
	// What the reports say while waiting, read before the read starts:
	// the read changes the connection and its counters.
	ms.Connects, ms.Connected = m.connects, m.conn != nil
	ms.Observation = switchover.KindWaiting.String()
	done := make(chan struct{})
	m.r.wg.Add(1) // the monitor's own count keeps the WaitGroup above zero
	go func() {
		defer m.r.wg.Done()
		defer close(done)
		m.read(ctx, o)
	}()
	interval := m.interval
	if interval <= 0 {
		interval = m.r.cfg.HighInterval
	}
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		w := switchover.Observation{Role: m.role, Gen: m.gen, Kind: switchover.KindWaiting, DNS: m.resolve(ctx, nil)}
		if interval, _ = m.r.report(w, ms); ctx.Err() != nil {
			interval = time.Hour // Close: only wait for the read to end
		}
		t.Reset(interval)
	}
}

func (m *monitor) host() string {
	if m.target != "" {
		return m.target
	}
	return m.r.monConfig.Host
}

// read connects if needed and reads the metadata into o.
func (m *monitor) read(ctx context.Context, o *switchover.Observation) {
	if m.conn != nil && m.conn.IsClosed() {
		m.disconnect() // waits for pgconn's cleanup of a broken connection
		m.engine = meta.EngineAuto
	}
	if m.conn == nil {
		if err := m.connect(ctx); err != nil {
			o.Kind, o.Err = switchover.KindNoConn, err
			return
		}
	}
	qctx, cancel := context.WithTimeout(ctx, m.r.cfg.MonitorQueryTimeout)
	defer cancel()
	if m.engine == meta.EngineAuto {
		src, err := meta.Detect(qctx, m.conn, m.r.engine)
		if errors.Is(err, topology.ErrUntrusted) {
			m.untrusted(err)
			o.Kind = switchover.KindAbsent
			return
		}
		if err != nil {
			o.Kind, o.Err = switchover.KindFailed, err
			m.dropBroken(err)
			return
		}
		if src.Engine == meta.EngineAuto {
			o.Kind = switchover.KindAbsent
			return
		}
		m.engine, m.noArg, m.topology = src.Engine, src.NoArg, src.Topology
	}
	rows, bad, err := meta.Read(qctx, m.conn, meta.Source{Engine: m.engine, NoArg: m.noArg})
	if err != nil {
		if meta.IsAbsent(err) || errors.Is(err, topology.ErrUntrusted) {
			if errors.Is(err, topology.ErrUntrusted) {
				m.untrusted(err) // replaced since Detect: refused as at Detect
			}
			m.engine = meta.EngineAuto
			o.Kind = switchover.KindAbsent
			return
		}
		o.Kind, o.Err = switchover.KindFailed, err
		m.dropBroken(err)
		return
	}
	o.Engine = m.engine
	rows = m.admit(rows)
	m.warn(rows, bad)
	if len(rows) == 0 {
		o.Kind = switchover.KindEmpty
		return
	}
	o.Kind = switchover.KindRows
	o.View = meta.ViewOf(rows, m.role)
	o.Peer = meta.ViewOf(rows, m.role.Other())
	m.correctHost(ctx, o.View)
	// The topology is the role's only on the role's own server: once the
	// host is corrected and the connection kept.
	if m.topology && m.corrected && !m.retarget && m.conn != nil && o.View.Found && m.r.needsTopology(m.role) {
		m.readTopology(qctx, o)
	}
}

// readTopology adds the role's instances to o: the cluster's instances from
// aurora_replica_status(), their endpoints derived from the role's
// endpoints, as the AWS wrappers do. A function that has gone is read no
// more, nor is one that fails with a server error (permission denied,
// say), on this connection: the metadata's rows stand either way, and a
// poll never fails because of the topology.
func (m *monitor) readTopology(ctx context.Context, o *switchover.Observation) {
	ids, bad, err := topology.ReadAurora(ctx, m.conn)
	if errors.Is(err, topology.ErrUntrusted) {
		m.topology = false // the metadata's rows stand; the instances are not read
		m.once("topology:untrusted", slog.LevelWarn, "bluegreen: cluster topology function not trusted; instance endpoints are not routed",
			slog.String("function", topology.AuroraFunction), slog.String("error", m.r.redact(err.Error())))
		return
	}
	if err != nil {
		m.topology = false
		var pe interface{ SQLState() string }
		if !meta.IsAbsent(err) && errors.As(err, &pe) {
			m.once("topology:"+pe.SQLState(), slog.LevelWarn, "bluegreen: cluster topology not readable; instance endpoints are not routed",
				slog.String("function", topology.AuroraFunction), slog.String("error", m.r.redact(err.Error())))
		}
		m.dropBroken(err)
		return
	}
	for _, e := range bad {
		var many *topology.TooManyRowsError
		if errors.As(e, &many) {
			m.once("cut:topology", slog.LevelWarn, "bluegreen: cluster topology has more rows than holdfast uses; the rest are ignored",
				slog.String("function", many.Function), slog.Int("limit", many.Limit), slog.Int("ignored", many.Extra))
			continue
		}
		m.once("bad:"+e.Error(), slog.LevelWarn, "bluegreen: topology row ignored", slog.String("error", m.r.redact(e.Error())))
	}
	domain := topology.InstanceDomain(o.View.Endpoints)
	if domain == "" {
		m.once("domain", slog.LevelWarn, "bluegreen: instance endpoints cannot be derived from the metadata's endpoints; they are not routed",
			slog.String("endpoint", o.View.Endpoint))
		return
	}
	o.Topology = true
	for _, in := range topology.Instances(ids, domain, o.View.Port) {
		if m.r.scope.Contains(in.Host) { // (derived from admitted endpoints: always)
			o.Instances = append(o.Instances, in)
		}
	}
}

// untrusted logs, once per generation for both monitors, that the
// metadata function is owned by a role that is neither a superuser nor
// rdsadmin, and so not read: routing is off, as when the function does
// not exist.
func (m *monitor) untrusted(err error) {
	if !m.r.firstRowWarning(m.gen, "untrusted") {
		return
	}
	m.r.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "bluegreen: metadata function not trusted; blue/green routing is off, as without the metadata",
		slog.String("error", m.r.redact(err.Error())),
		slog.String("check", "RDS's own functions are owned by rdsadmin (or belong to the rds_tools extension): drop the function of that name that a database owner created"),
		slog.String("bgd_id", m.r.cfg.ID), slog.String("role", m.role.String()))
}

// admit returns the rows whose endpoint lies in the deployment's domain
// (Router.scope: the pool's hosts and their account and Region suffix),
// at most topology.MaxRows per role, in their order. Each row left out
// for its endpoint is logged once per generation (Warn, at most
// topology.MaxRows of them), and so is a role cut.
func (m *monitor) admit(rows []meta.Row) []meta.Row {
	var out []meta.Row
	per := map[meta.Role]int{}
	cut := map[meta.Role]int{}
	for _, r := range rows {
		if !m.r.scope.Contains(r.Endpoint) {
			m.warnOutside(r)
			continue
		}
		if per[r.Role] >= topology.MaxRows {
			cut[r.Role]++
			continue
		}
		per[r.Role]++
		out = append(out, r)
	}
	for _, role := range []meta.Role{meta.RoleUnknown, meta.RoleSource, meta.RoleTarget} {
		if n := cut[role]; n > 0 && m.r.firstRowWarning(m.gen, "cut:"+role.String()) {
			m.r.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "bluegreen: metadata has more rows of a role than holdfast uses; the rest are ignored",
				slog.String("row_role", role.String()), slog.Int("limit", topology.MaxRows), slog.Int("ignored", n),
				slog.String("bgd_id", m.r.cfg.ID), slog.String("role", m.role.String()))
		}
	}
	return out
}

// warnOutside logs, once per generation for both monitors (they read the
// same rows), a metadata row whose endpoint is outside the deployment's
// domain.
func (m *monitor) warnOutside(r meta.Row) {
	if !m.r.firstRowWarning(m.gen, "outside:"+r.Endpoint) {
		return
	}
	m.r.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn,
		"bluegreen: metadata row outside the deployment's domain ignored: its host is not connected to, routed to, accepted in a certificate or given a password",
		slog.String("endpoint", topology.Truncate(r.Endpoint, 128)), slog.Int("port", r.Port),
		slog.String("row_role", r.Role.String()), slog.String("domain", m.r.scope.String()),
		slog.String("bgd_id", m.r.cfg.ID), slog.String("role", m.role.String()))
}

// dropBroken closes the connection after a failure that left it unusable
// (anything but a server error).
func (m *monitor) dropBroken(err error) {
	var pe interface{ SQLState() string }
	if m.conn.IsClosed() || !errors.As(err, &pe) {
		m.disconnect()
		m.engine = meta.EngineAuto
	}
}

// once logs msg the first time key is seen (at most 100 keys).
func (m *monitor) once(key string, level slog.Level, msg string, attrs ...slog.Attr) {
	if m.warned[key] || len(m.warned) > maxWarned {
		return
	}
	m.warned[key] = true
	attrs = append(attrs, slog.String("bgd_id", m.r.cfg.ID), slog.String("role", m.role.String()))
	m.r.cfg.Logger.LogAttrs(context.Background(), level, msg, attrs...)
}

// warn logs, once per value, rows this package could not use fully.
func (m *monitor) warn(rows []meta.Row, bad []error) {
	once := func(key, msg string, attrs ...slog.Attr) { m.once(key, slog.LevelWarn, msg, attrs...) }
	for _, err := range bad {
		once("bad:"+err.Error(), "bluegreen: metadata row ignored", slog.String("error", m.r.redact(err.Error())))
	}
	for _, r := range rows {
		if !meta.VersionKnown(r.Version) {
			once("version:"+r.Version, "bluegreen: unknown metadata version, read as "+meta.KnownVersion,
				slog.String("version", topology.Truncate(r.Version, 32)))
		}
		if r.Role == meta.RoleUnknown {
			once("role:"+r.Endpoint, "bluegreen: metadata row with an unknown role ignored",
				slog.String("endpoint", r.Endpoint))
		}
		if !r.KnownStatus {
			once("status:"+r.Status, "bluegreen: unknown metadata status ignored",
				slog.String("status", topology.Truncate(r.Status, 64)), slog.String("endpoint", r.Endpoint))
		}
	}
}

// connect opens the monitor's connection to its target host.
func (m *monitor) connect(ctx context.Context) error {
	cc := m.r.monConfig.Copy()
	if m.target != "" && m.target != topology.NormHost(cc.Host) {
		if err := topology.Retarget(cc, m.target, m.targetPort, m.r.scope); err != nil {
			return err // (never: the target is an admitted row's)
		}
	}
	cc.LookupFunc = m.r.monitorLookup
	cctx, cancel := context.WithTimeout(ctx, m.r.cfg.MonitorConnectTimeout)
	defer cancel()
	if m.r.monitorConnect != nil {
		if err := m.r.monitorConnect(cctx, cc); err != nil {
			return err
		}
	}
	conn, err := pgx.ConnectConfig(cctx, cc)
	if err != nil {
		return err
	}
	m.conn = conn
	m.connects++
	return nil
}

// correctHost moves the monitor to its role's endpoint when that endpoint
// is another server than the one it reads from (how the green monitor,
// which starts on the pool's blue host, reaches green). It does so once per
// generation, as the AWS wrappers do: in POST green's metadata renames its
// rows to the blue names, which during the switchover still lead to the
// old blue server; following them would read old blue's metadata (frozen
// at an earlier phase on some deployments: a false rollback) or bounce
// between the servers.
func (m *monitor) correctHost(ctx context.Context, v meta.View) {
	if m.corrected || !v.Found || v.Endpoint == "" || topology.IsOld(v.Endpoint) {
		return
	}
	if v.Endpoint == topology.NormHost(m.host()) {
		m.corrected = true // already reading from its role's endpoint
		return
	}
	lctx, cancel := context.WithTimeout(ctx, m.r.cfg.MonitorQueryTimeout)
	addrs, err := m.r.monitorLookup(lctx, v.Endpoint)
	cancel()
	if err != nil || len(addrs) == 0 {
		return // keep reading where we are
	}
	here, herePort := topology.RemoteIP(m.conn), topology.RemotePort(m.conn)
	m.corrected = true
	m.target = v.Endpoint
	if v.Port > 0 && v.Port <= 65535 {
		m.targetPort = uint16(v.Port)
	}
	for _, a := range addrs {
		if topology.HostOf(a) == here && (m.targetPort == 0 || int(m.targetPort) == herePort) {
			return // the same server: keep the connection
		}
	}
	m.disconnect()
	m.engine = meta.EngineAuto
	m.retarget = true
}

// resolve looks up every host the role tracks, through the pool's
// resolver.
func (m *monitor) resolve(ctx context.Context, extra []string) map[string]switchover.DNSResult {
	hosts := m.r.hostsToResolve(m.role, extra)
	if len(hosts) == 0 {
		return nil
	}
	out := make(map[string]switchover.DNSResult, len(hosts))
	for _, h := range hosts {
		if ctx.Err() != nil {
			break
		}
		lctx, cancel := context.WithTimeout(ctx, m.r.cfg.MonitorQueryTimeout)
		addrs, err := m.r.base(lctx, h)
		cancel()
		var res switchover.DNSResult
		var dnsErr *net.DNSError
		switch {
		case err == nil && len(addrs) > 0:
			res.IP = topology.HostOf(addrs[0])
		case err == nil, errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			res.Gone = true
		default:
			res.Err = err
		}
		out[h] = res
	}
	return out
}
