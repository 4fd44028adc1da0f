package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/console"
)

// shutdownWait bounds how long serve waits, once told to stop, for the
// controls in progress (a drain) before it cancels them.
const shutdownWait = 30 * time.Second

// serve runs the web console until ctx ends.
func (r *runner) serve(ctx context.Context, cfg *lb.Config, cf cmdFlags, fixedOperator string) int {
	if cf.operatorHeader != "" && fixedOperator != "" {
		return r.errorf(exitUsage, "serve: use -operator-header (behind a proxy) or -operator (one local operator), not both")
	}
	var proxies []netip.Prefix
	for _, p := range cf.trustedProxies {
		pfx, err := parsePrefix(p)
		if err != nil {
			return r.errorf(exitUsage, "serve: -trusted-proxy %q: want an address or a CIDR prefix", p)
		}
		proxies = append(proxies, pfx)
	}
	if len(proxies) > 0 && cf.operatorHeader == "" {
		return r.errorf(exitUsage, "serve: -trusted-proxy needs -operator-header")
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Explicit translation: holdfast.lb.drain.duration (s) is
	// holdfast_lb_drain_duration_seconds whatever the exporter's default.
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return r.errorf(exitFailed, "serve: metrics: %v", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer func() { _ = mp.Shutdown(context.WithoutCancel(ctx)) }()
	metrics, err := lb.NewMetrics(mp)
	if err != nil {
		return r.errorf(exitFailed, "serve: metrics: %v", err)
	}

	su, code := r.prepare(ctx, cfg, cf)
	if su == nil {
		return code
	}
	defer su.close()
	su.metrics = metrics
	monBalancers, err := su.balancers()
	if err != nil {
		return r.errorf(exitUsage, "serve: %v", err)
	}
	mon, err := lb.NewMonitor(lb.MonitorConfig{Balancers: monBalancers, Groups: cfg.Groups, Locker: su.store, Concurrency: su.conc, Metrics: metrics})
	if err != nil {
		return r.errorf(exitUsage, "serve: %v", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = mon.Close(cctx)
	}()
	con, err := console.New(console.Config{
		Groups:        cfg.Groups,
		Permissions:   cfg.Operators,
		Status:        mon,
		Store:         su.store,
		NewController: su.controller,
		Identity:      console.Identity{Header: cf.operatorHeader, TrustedProxies: proxies, Fixed: fixedOperator},
		Poll:          cf.poll,
		Refresh:       cf.refresh,
		Metrics:       promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Logger:        su.logger,
	})
	if err != nil {
		return r.errorf(exitUsage, "serve: %v", err)
	}
	ln, err := net.Listen("tcp", cf.listen)
	if err != nil {
		_ = con.Close(context.WithoutCancel(ctx))
		return r.errorf(exitUsage, "serve: %v", err)
	}
	srv := &http.Server{Handler: con.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(su.logger.Handler(), slog.LevelWarn)}
	who := "read-only (no -operator-header, no -operator)"
	switch {
	case cf.operatorHeader != "":
		who = "operator from the " + cf.operatorHeader + " header"
	case fixedOperator != "":
		who = "every request is operator " + fixedOperator
	}
	r.printf("holdfast-lb: console on http://%s/ (%s)\n", ln.Addr(), who)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownWait)
	defer cancel()
	_ = srv.Shutdown(sctx) // stops taking requests; a control's own goroutine is the console's
	if serveErr == nil {
		serveErr = <-served
	}
	if err := con.Close(sctx); err != nil {
		r.printf("holdfast-lb: stopped the controls still running after %s\n", shutdownWait)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return r.errorf(exitFailed, "serve: %v", serveErr)
	}
	return exitOK
}

// parsePrefix accepts "10.0.0.0/8" and "10.0.0.7".
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
