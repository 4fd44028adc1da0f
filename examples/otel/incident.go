package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// incident plays, on the throwaway server, what an operator sees holdfast
// absorb: the server itself refuses the service's new connections (ALTER
// ROLE widget CONNECTION LIMIT 0: FATAL, SQLSTATE 53300, too many
// connections for role "widget", as when another service holds the
// role's or the server's connection slots) until holdfast has retried,
// then accepts them again. Connections already open are not touched.
//
// It is no part of the service: a service has none of this. It ends the
// refusal when the service's own telemetry (holdfast.retries, read through
// a reader of the service's MeterProvider) has counted a retry, not after
// a fixed time, so that a slow machine cannot make the server accept the
// first attempt (no retry to show) or refuse past holdfast's retries (a
// failed request).
type incident struct {
	admin   *pgx.Conn // the throwaway server's superuser
	watch   *sdkmetric.ManualReader
	logger  *slog.Logger
	lifting chan struct{} // closed when the last refusal has ended (admin is free)
}

func newIncident(ctx context.Context, superuserDSN string, logger *slog.Logger) (*incident, error) {
	admin, err := pgx.Connect(ctx, superuserDSN)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	close(done)
	return &incident{admin: admin, watch: sdkmetric.NewManualReader(), logger: logger, lifting: done}, nil
}

// readers are the readers to give the service's MeterProvider: the
// incident's, which it reads holdfast.retries through; none when in is
// nil.
func (in *incident) readers() []sdkmetric.Option {
	if in == nil {
		return nil
	}
	return []sdkmetric.Option{sdkmetric.WithReader(in.watch)}
}

// refuse makes the server refuse the service's new connections until
// holdfast.retries has grown (at most 10s). It does nothing when in is
// nil.
func (in *incident) refuse(ctx context.Context) {
	if in == nil {
		return
	}
	<-in.lifting // the previous refusal has ended
	before := in.retries(ctx)
	if _, err := in.admin.Exec(ctx, `ALTER ROLE widget CONNECTION LIMIT 0`); err != nil {
		in.logger.Error("incident: could not refuse connections", slog.String("error", err.Error()))
		return
	}
	in.logger.Info("incident: the server refuses the service's new connections")
	in.lifting = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		for deadline := time.Now().Add(10 * time.Second); in.retries(context.Background()) == before && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := in.admin.Exec(context.Background(), `ALTER ROLE widget CONNECTION LIMIT -1`); err != nil {
			in.logger.Error("incident: could not accept connections again", slog.String("error", err.Error()))
			return
		}
		in.logger.Info("incident: holdfast retried; the server accepts the service's connections again")
	}(in.lifting)
}

// retries is the sum of holdfast.retries, as the service's telemetry has
// it now.
func (in *incident) retries(ctx context.Context) int64 {
	var rm metricdata.ResourceMetrics
	if err := in.watch.Collect(ctx, &rm); err != nil {
		return 0
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "holdfast.retries" {
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// close waits for the last refusal to end and closes the superuser
// connection.
func (in *incident) close() error {
	<-in.lifting
	return in.admin.Close(context.Background())
}
