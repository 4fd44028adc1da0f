package readiness

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/holdfast-db/holdfast/internal/cfgerr"
)

// ServeConfig configures [Checker.Serve]. The zero value is valid and
// means the defaults; Serve rejects a negative duration, but for
// ShutdownDelay, where it means none. The defaults:
//
//	field            default
//	Listener         net.Listen("tcp", Server.Addr), ":http" when empty
//	Admin            none
//	AdminListener    net.Listen("tcp", Admin.Addr)
//	Signals          SIGTERM, os.Interrupt (SIGINT)
//	DrainTimeout     20s
//	ShutdownDelay    10s
//	ShutdownTimeout  5s
//
// The delay runs beside the drain, so that a shutdown takes at most
// max(ShutdownDelay, DrainTimeout) + ShutdownTimeout: 25s, within
// Kubernetes' default terminationGracePeriodSeconds of 30.
type ServeConfig struct {
	// Listener is served instead of a new listener on Server.Addr
	// (":http" when empty). Serve closes it.
	Listener net.Listener
	// Admin, when set, is served beside the service's server for the
	// handlers that must not share its port: [Checker.AdminHandler] and
	// [Checker.DrainHandler]. Serve serves it until the end (a drain can
	// be watched, and enabled, throughout) and shuts it down after the
	// service's server and the Checker's Close, within the same
	// ShutdownTimeout; if it stops serving on its own (its listener
	// failed), Serve shuts down as on a signal, drain included. Its Addr
	// must be set unless AdminListener is: a loopback address such as
	// "127.0.0.1:8081" (the handlers answer local callers only unless
	// Config.Authorize is set), or an admin port with Config.Authorize.
	Admin *http.Server
	// AdminListener is served by Admin instead of a new listener on
	// Admin.Addr. Serve closes it.
	AdminListener net.Listener
	// Signals start the shutdown. Default: SIGTERM and os.Interrupt
	// (SIGINT). A second signal during the drain or the delay skips the
	// rest of them and shuts down at once.
	Signals []os.Signal
	// DrainTimeout bounds the drain on shutdown. Default 20s, which with
	// the default ShutdownTimeout fits in Kubernetes' default
	// terminationGracePeriodSeconds of 30.
	DrainTimeout time.Duration
	// ShutdownDelay is the least time from the start of the drain (the
	// signal, or the end of ctx) to http.Server.Shutdown: the port keeps
	// accepting and serving, and readiness answers 503, so that whatever
	// sends the service traffic learns that it is leaving before the port
	// closes. Default 10s. A negative value means none: the servers shut
	// down as soon as the drain completes, for a service that nothing
	// routes to (a test, a batch job) or whose preStop hook already waits.
	//
	// The default is the time the common routers take: Kubernetes takes a
	// terminating pod out of its EndpointSlices at once (it does not wait
	// for the readiness probe), but kube-proxy on every node, ingress
	// controllers and service meshes learn it asynchronously, in well
	// under a second to several seconds; a load balancer that probes
	// /readyz itself needs its check interval times its unhealthy
	// threshold, 10s with Google Cloud's defaults (5s × 2), and the
	// kubelet's readinessProbe (Serve's settings below) sees the 503
	// within its periodSeconds of 5. It stays below DrainTimeout, so that
	// the default bounds fit Kubernetes' default grace period. Raise it
	// (and terminationGracePeriodSeconds) for load balancers that probe
	// less often: an AWS target group's default is 30s × 2 (60s), an F5
	// or A10 monitor's its interval times its down count.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds http.Server.Shutdown; past it the remaining
	// connections are closed with http.Server.Close. Default 5s.
	ShutdownTimeout time.Duration
}

// defaultShutdownDelay is ServeConfig.ShutdownDelay's default; its doc
// says how it was chosen.
const defaultShutdownDelay = 10 * time.Second

// shutdownOwner is the drain owner of [Checker.Serve]: a drain it makes is
// held by "shutdown" in the probe's JSON, [LockedError].Holder and
// [DrainTimeoutError].Owner.
const shutdownOwner = "shutdown"

func (sc ServeConfig) validate() (ServeConfig, error) {
	if d := cfgerr.SetDefaults([]cfgerr.Duration{
		{Name: "ServeConfig.DrainTimeout", Value: &sc.DrainTimeout, Default: 20 * time.Second},
		{Name: "ServeConfig.ShutdownTimeout", Value: &sc.ShutdownTimeout, Default: 5 * time.Second},
	}); d != nil {
		return sc, &ConfigError{Pkg: "readiness", Field: d.Name, Why: "must not be negative (got " + d.Value.String() + ")"}
	}
	switch {
	case sc.ShutdownDelay == 0:
		sc.ShutdownDelay = defaultShutdownDelay
	case sc.ShutdownDelay < 0:
		sc.ShutdownDelay = 0 // none
	}
	for _, s := range sc.Signals {
		if s == nil {
			return sc, &ConfigError{Pkg: "readiness", Field: "ServeConfig.Signals", Why: "a signal is nil"}
		}
	}
	switch {
	case sc.AdminListener != nil && sc.Admin == nil:
		return sc, &ConfigError{Pkg: "readiness", Field: "ServeConfig.AdminListener", Why: "set without ServeConfig.Admin, the server to serve it"}
	case sc.Admin != nil && sc.AdminListener == nil && sc.Admin.Addr == "":
		return sc, &ConfigError{Pkg: "readiness", Field: "ServeConfig.Admin.Addr", Why: "empty: give the admin server an address, such as 127.0.0.1:8081, or an AdminListener"}
	}
	if len(sc.Signals) == 0 {
		sc.Signals = []os.Signal{syscall.SIGTERM, os.Interrupt}
	}
	return sc, nil
}

// Serve runs srv for the life of the service, so that a rolling deploy
// loses no request:
//
//  1. It serves srv on the listener (and Admin on its own), and opens the
//     startup gate ([Checker.Start]) in the background unless it is open:
//     probes answer 503 "starting" until then, instead of refusing
//     connections.
//  2. On a signal (SIGTERM by default) or when ctx ends, it drains with
//     owner "shutdown" and [TakeOver], bounded by DrainTimeout:
//     readiness answers 503 at once and Serve waits until the connections
//     acquired from every target's pool (for a *sql.DB, the pool under it)
//     and the in-flight requests are gone, serving requests that still
//     arrive meanwhile. It keeps the port open and serving at least
//     ShutdownDelay (10s by default) from the start of the drain, so that
//     load balancers and kube-proxy see the 503, or the pod leave its
//     endpoints, before the port closes; a second signal cuts the drain
//     and the delay short.
//  3. It shuts srv down (http.Server.Shutdown, bounded by ShutdownTimeout,
//     then http.Server.Close), closes the Checker, shuts Admin down within
//     the same bound, and closes every target:
//     each *sql.DB (DB.Close), then each pool, the pool under a *sql.DB
//     included, which waits for connections still acquired.
//
// Serve returns nil after a clean shutdown. Otherwise it returns, joined,
// what went wrong: the [*DrainTimeoutError] of a drain that did not
// complete (the shutdown still happens: the process is leaving), the error
// of Shutdown, the error that made srv (or Admin) stop serving on its own,
// or a [*TargetError] with the error of a DB.Close. It returns a
// [*ConfigError] for a nil srv, a negative DrainTimeout or
// ShutdownTimeout, or an Admin without an address, or the error of
// net.Listen, without serving and without closing anything it was given.
// Serve owns the goroutines it starts and joins them before it returns.
//
// # Kubernetes
//
// A rolling deploy loses no request when the pod outlives the shutdown:
// terminationGracePeriodSeconds above max(ShutdownDelay, DrainTimeout) +
// ShutdownTimeout (25s with the defaults; add a preStop hook's time, if
// any), and ShutdownDelay at least the time the service's routers take to
// stop sending it requests. Settings that fit Serve's defaults:
//
//	spec:
//	  terminationGracePeriodSeconds: 30   # > max(ShutdownDelay 10s, DrainTimeout 20s) + ShutdownTimeout 5s
//	  containers:
//	    - name: app
//	      readinessProbe:
//	        httpGet: {path: /readyz, port: 8080}
//	        periodSeconds: 5
//	        timeoutSeconds: 1        # ProbeTimeout (800ms) answers before this
//	        failureThreshold: 1      # the checker already waits for 3 consecutive failed checks
//	      livenessProbe:
//	        httpGet: {path: /livez, port: 8080}   # never depends on the database
//	        periodSeconds: 10
//	        timeoutSeconds: 1
//	        failureThreshold: 3
//
//	  - Never point the liveness probe at the database: an outage would
//	    become a restart storm. No startupProbe is needed (readiness covers
//	    startup); if you add one, point it at /livez.
//	  - Damp flapping in one place: the checker's FailureThreshold (3) with
//	    failureThreshold: 1, or FailureThreshold 1 and Kubernetes counting.
//	  - Kubernetes sends SIGTERM (after a preStop hook, if any) and removes
//	    the pod from its endpoints meanwhile, asynchronously; ShutdownDelay
//	    serves the requests that still arrive, so no preStop sleep is
//	    needed. Keep preStop + max(ShutdownDelay, DrainTimeout) +
//	    ShutdownTimeout below terminationGracePeriodSeconds (default 30s,
//	    preStop included), or the kubelet sends SIGKILL in mid-drain.
//	  - Keep the admin listener (ServeConfig.Admin) out of the pod's
//	    Service and off the probes: on 127.0.0.1, a deploy job reaches it
//	    with kubectl exec or kubectl port-forward; on an admin port, set
//	    Config.Authorize.
//	  - Load balancers that probe pods themselves (F5 or A10 monitors,
//	    cloud NEG or ALB target groups) need their health-check interval
//	    times their unhealthy threshold to see the 503: set ShutdownDelay
//	    to at least that when it exceeds 10s, and raise the grace period to
//	    match.
func (c *Checker) Serve(ctx context.Context, srv *http.Server, cfg ServeConfig) error {
	if srv == nil {
		return &ConfigError{Pkg: "readiness", Field: "srv", Why: "must not be nil"}
	}
	cfg, err := cfg.validate()
	if err != nil {
		return err
	}
	ln := cfg.Listener
	if ln == nil {
		addr := srv.Addr
		if addr == "" {
			addr = ":http"
		}
		if ln, err = net.Listen("tcp", addr); err != nil {
			return err
		}
	}
	admin, adminLn := cfg.Admin, cfg.AdminListener
	if admin != nil && adminLn == nil {
		if adminLn, err = net.Listen("tcp", admin.Addr); err != nil {
			if cfg.Listener == nil {
				_ = ln.Close() // ours
			}
			return err
		}
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, cfg.Signals...)
	defer signal.Stop(sigs)

	var wg sync.WaitGroup
	served := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		served <- srv.Serve(ln)
	}()
	adminServed := make(chan error, 1) // never ready without an admin server
	if admin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			adminServed <- admin.Serve(adminLn)
		}()
	}
	startCtx, stopStart := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStart()
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = c.Start(startCtx) // the outcome is in the status and the log
	}()

	var serveErr, adminErr error
	adminDone := false
	trigger := ""
	select {
	case s := <-sigs:
		trigger = "signal " + s.String()
	case <-ctx.Done():
		trigger = "context done: " + context.Cause(ctx).Error()
	case serveErr = <-served:
		trigger = "server stopped: " + serveErr.Error()
	case adminErr = <-adminServed:
		adminDone = true
		trigger = "admin server stopped: " + adminErr.Error()
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "readiness: shutting down", slog.String("trigger", trigger),
		slog.Duration("shutdown_delay", cfg.ShutdownDelay), slog.Duration("drain_timeout", cfg.DrainTimeout))

	// A second signal, if any, skips the drain and the delay.
	hurry, stopHurry := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopHurry(nil)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case s := <-sigs:
			c.log.LogAttrs(ctx, slog.LevelWarn, "readiness: second signal: shutting down now", slog.String("signal", s.String()))
			stopHurry(errors.New("readiness: second signal " + s.String()))
		case <-hurry.Done():
		}
	}()

	var errs []error
	if serveErr == nil {
		t0 := time.Now()
		if _, err := c.Drain(hurry, shutdownOwner, TakeOver(), WithDrainTimeout(cfg.DrainTimeout)); err != nil {
			errs = append(errs, err)
		}
		if rest := cfg.ShutdownDelay - time.Since(t0); rest > 0 && hurry.Err() == nil {
			expired, stop := c.newTimer(rest)
			select {
			case <-expired:
			case <-hurry.Done():
			}
			stop()
		}
	} else if !errors.Is(serveErr, http.ErrServerClosed) {
		errs = append(errs, serveErr)
	}

	stopStart()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		errs = append(errs, err)
		_ = srv.Close()
	}
	c.Close() // interrupts the drains that admin requests wait on
	if admin != nil {
		if err := admin.Shutdown(sctx); err != nil {
			errs = append(errs, err)
			_ = admin.Close()
		}
	}
	cancel()
	stopHurry(nil)
	wg.Wait()
	if serveErr == nil {
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	if admin != nil && !adminDone {
		adminErr = <-adminServed
	}
	if adminErr != nil && !errors.Is(adminErr, http.ErrServerClosed) {
		errs = append(errs, adminErr)
	}
	if err := c.closeTargets(); err != nil {
		errs = append(errs, err)
	}
	msg := "readiness: shut down: server stopped, pool closed"
	if len(c.targets) > 1 {
		msg = "readiness: shut down: server stopped, pools and databases closed"
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, msg)
	return errors.Join(errs...)
}

// closeTargets closes every target: each *sql.DB, then each pool (that of
// a *sql.DB too; pgxpool's Close waits for its acquired connections and
// does nothing the second time). It returns what DB.Close returned.
func (c *Checker) closeTargets() error {
	var errs []error
	for _, t := range c.targets {
		if t.db != nil {
			if err := t.db.Close(); err != nil {
				errs = append(errs, &TargetError{Target: t.name, Err: err})
			}
		}
	}
	for _, t := range c.targets {
		t.pool.Close()
	}
	return errors.Join(errs...)
}
