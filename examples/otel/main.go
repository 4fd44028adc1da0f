// Command otel is a small HTTP service whose database pool is kept by
// holdfast, with OpenTelemetry metrics and traces exported to stdout and
// JSON log lines on stdout: no collector, no network.
//
// It sets up the OpenTelemetry SDK as an application would (the global
// meter and tracer providers, before building the holdfast factory), so
// holdfast picks the providers up without any option. The pool connects
// to a real PostgreSQL server, as the service would: nothing between them
// is faked, and every metric and span printed is the real one.
//
// It connects to DATABASE_URL, or, when that is unset, to a throwaway
// PostgreSQL it starts itself (it needs the PostgreSQL server binaries:
// initdb, pg_ctl), and logs which. On the throwaway server it also plays
// an incident, to show what an operator sees: the service's role
// ("widget", CONNECTION LIMIT 0) is refused new connections by the server
// itself (SQLSTATE 53300, too_many_connections, as when another service
// holds the role's or the server's slots) for a moment at startup and
// again when the pool must grow; holdfast retries and the requests
// succeed. The incident needs the superuser of the throwaway server, so it
// is not played on DATABASE_URL.
//
// Run it with:
//
//	go run ./examples/otel                    # a few requests, then print the telemetry and exit
//	go run ./examples/otel -listen :8080      # serve GET /widget until interrupted
//	DATABASE_URL=postgres://app@localhost/app go run ./examples/otel
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func main() {
	var o options
	flag.IntVar(&o.requests, "requests", 4, "requests to make in-process before exiting (without -listen)")
	flag.StringVar(&o.listen, "listen", "", "serve GET /widget on this address until interrupted")
	flag.BoolVar(&o.healthy, "healthy", false, "do not play the incident (the throwaway server refusing the service's connections for a moment)")
	flag.Parse()
	o.dsn = os.Getenv("DATABASE_URL")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "otel:", err)
		os.Exit(1)
	}
}

type options struct {
	dsn      string // DATABASE_URL; empty: start a throwaway PostgreSQL
	requests int
	listen   string
	healthy  bool
}

func run(ctx context.Context, w io.Writer, o options) (err error) {
	logger := slog.New(slog.NewJSONHandler(w, nil))
	dsn, in, stop, err := database(ctx, logger, o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()

	// 1. OpenTelemetry, as the application sets it up. Metrics are
	// exported when the provider shuts down (and every minute while
	// serving); spans as they end.
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("widget-service"))
	mexp, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(append([]sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp))},
		in.readers()...)...) // the incident's reader, if any: no part of a service
	texp, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(texp))
	defer func() {
		// Shutdown flushes: the metrics are printed here.
		err = errors.Join(err, tp.Shutdown(context.Background()), mp.Shutdown(context.Background()))
	}()
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)

	// 2. holdfast, with the global providers (no option needed), and the
	// pool, on the database as it is.
	f, err := holdfast.New(holdfast.WithLogger(logger))
	if err != nil {
		return err
	}
	defer f.Close()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	// The incident, part 1: the server refuses the service's first
	// connection (53300) until holdfast has retried it.
	in.refuse(ctx)
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	handler := widgets(f, pool, tp.Tracer("widget-service"), logger)
	if o.listen != "" {
		srv := &http.Server{Addr: o.listen, Handler: handler, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			<-ctx.Done()
			_ = srv.Shutdown(context.Background())
		}()
		logger.Info("serving", slog.String("addr", o.listen))
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	for i := range o.requests {
		if i == o.requests/2 && in != nil {
			// The incident, part 2: the pool must grow (here: its idle
			// connections are gone) while the server refuses the role's
			// connections again, until holdfast has retried.
			pool.Reset()
			in.refuse(ctx)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/widget", nil))
		logger.Info("request served", slog.Int("status", rec.Code), slog.String("body", rec.Body.String()))
	}
	return nil
}

// database returns DATABASE_URL when it is set. Otherwise it starts a
// throwaway PostgreSQL server with a role "widget" for the service, and,
// unless o.healthy, an incident to play on it (incident.go).
func database(ctx context.Context, logger *slog.Logger, o options) (dsn string, in *incident, stop func() error, err error) {
	if o.dsn != "" {
		logger.Info("database: DATABASE_URL (no incident is played on it)")
		return o.dsn, nil, func() error { return nil }, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return "", nil, nil, fmt.Errorf("DATABASE_URL is not set, and starting a throwaway PostgreSQL failed: %w", err)
	}
	logger.Info("database: DATABASE_URL is not set, started a throwaway PostgreSQL", slog.String("addr", srv.Addr()))
	if err := srv.Exec(ctx, `CREATE ROLE widget LOGIN`); err != nil {
		return "", nil, nil, errors.Join(err, srv.Stop())
	}
	// The service connects as its own role, not as the superuser.
	dsn = "postgres://widget@" + srv.Addr() + "/postgres?sslmode=disable"
	if o.healthy {
		return dsn, nil, srv.Stop, nil
	}
	if in, err = newIncident(ctx, srv.DSN(), logger); err != nil {
		return "", nil, nil, errors.Join(err, srv.Stop())
	}
	return dsn, in, func() error { return errors.Join(in.close(), srv.Stop()) }, nil
}

// widgets serves GET /widget: one query through holdfast's Acquire, under a
// server span, answering 503 when the database cannot be reached.
func widgets(f *holdfast.Factory, pool *pgxpool.Pool, tracer trace.Tracer, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /widget", func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tracer.Start(r.Context(), "GET /widget", trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		conn, err := f.Acquire(ctx, pool)
		if err != nil {
			logger.ErrorContext(ctx, "database unavailable", slog.String("error.reason", f.Classify(err).Reason))
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		defer conn.Release()
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class").Scan(&n); err != nil {
			http.Error(w, "query failed", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%d widgets", n)
	})
	return mux
}
