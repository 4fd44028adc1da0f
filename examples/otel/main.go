// Command otel is a small HTTP service whose database pool is kept by
// holdfast, with OpenTelemetry metrics and traces exported to stdout and
// JSON log lines on stdout: no collector, no network.
//
// It sets up the OpenTelemetry SDK as an application would (the global
// meter and tracer providers, before building the holdfast factory), so
// holdfast picks the providers up without any option. To show what an
// operator sees during the incident holdfast was built for, the database's
// connector fails the IAM token fetch with a 503 on the first connection
// and again when the pool grows.
//
// Run it with:
//
//	go run ./examples/otel                    # a few requests, then print the telemetry and exit
//	go run ./examples/otel -listen :8080      # serve GET /widget until interrupted
//
// It connects to DATABASE_URL, or, when that is unset, to a throwaway
// PostgreSQL it starts itself (it needs the PostgreSQL server binaries:
// initdb, pg_ctl), and logs which.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/holdfast-db/holdfast/cloudsql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

func main() {
	var o options
	flag.IntVar(&o.requests, "requests", 4, "requests to make in-process before exiting (without -listen)")
	flag.StringVar(&o.listen, "listen", "", "serve GET /widget on this address until interrupted")
	flag.BoolVar(&o.healthy, "healthy", false, "do not inject the token-fetch 503s")
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
	dsn, stop, err := database(ctx, logger, o.dsn)
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
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp)))
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

	// 2. holdfast, with the global providers (no option needed).
	// The fake connector plays the Cloud SQL connector's errors; the
	// factory classifies them as cloudsql.With makes it do.
	f, err := holdfast.New(holdfast.WithLogger(logger),
		holdfast.WithIntegration(holdfast.Integration{Name: "cloudsql-errors", Rules: cloudsql.Rules(), TypeRules: cloudsql.TypeRules()}))
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	var connector *fakes.Connector
	if !o.healthy {
		// The incident: the first connection's IAM token fetch answers 503
		// (one dial per connect: each injected 503 fails a connect).
		connector = harness.FakeConnector(cfg.ConnConfig, cloudsqltest.TokenFetch503())
	}
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
		if i == o.requests/2 && connector != nil {
			// The pool must grow (here: its idle connections are gone) and
			// the token endpoint answers 503 again.
			connector.Set(cloudsqltest.TokenFetch503())
			pool.Reset()
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/widget", nil))
		logger.Info("request served", slog.Int("status", rec.Code), slog.String("body", rec.Body.String()))
	}
	return nil
}

// database returns dsn when it is set. Otherwise it starts a throwaway
// PostgreSQL server and returns its connection string and its Stop.
func database(ctx context.Context, logger *slog.Logger, dsn string) (string, func() error, error) {
	if dsn != "" {
		logger.Info("database: DATABASE_URL")
		return dsn, func() error { return nil }, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return "", nil, fmt.Errorf("DATABASE_URL is not set, and starting a throwaway PostgreSQL failed: %w", err)
	}
	logger.Info("database: DATABASE_URL is not set, started a throwaway PostgreSQL", slog.String("addr", srv.Addr()))
	return srv.DSN(), srv.Stop, nil
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
