package failover_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    error
		class  classify.Class
		reason string
		ok     bool
	}{
		{&failover.HoldError{Host: "h", Err: context.DeadlineExceeded}, classify.Transient, "failover-held", true},
		{fmt.Errorf("connect: %w", &failover.HoldError{Host: "h", Err: context.Canceled}), 0, "", false},
		{&failover.HoldError{Host: "ro", Reader: true, Err: context.DeadlineExceeded}, classify.Transient, "failover-held", true},
		{fmt.Errorf("tx: %w", &failover.WriterRegionError{Host: "h", Region: "us-west-2", WriterRegion: "us-east-1"}), classify.Fatal, "failover-inactive-endpoint", true},
		{fmt.Errorf("tx: %w", &failover.WriterRegionError{Host: "h", Region: "us-east-1", WriterRegion: "us-west-2", OutOfHome: true}), classify.Fatal, "failover-writer-out-of-home", true},
		{&failover.NotWriterError{Host: "h", Addr: "a", Why: "in hot standby"}, classify.Transient, "failover-not-writer", true},
		{fmt.Errorf("query: %w", &failover.CutError{OldWriter: "a", NewWriter: "b", Err: context.DeadlineExceeded}), classify.Transient, "failover-cut", true},
		{errors.New("other"), 0, "", false},
	}
	for _, tt := range tests {
		v, ok := failover.Rule(tt.err)
		if ok != tt.ok || (ok && (v.Class != tt.class || v.Reason != tt.reason)) {
			t.Errorf("Rule(%v) = %v, %v; want %v %q, %v", tt.err, v, ok, tt.class, tt.reason, tt.ok)
		}
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&failover.CutError{OldWriter: "db-1", NewWriter: "db-2", Addr: "10.0.0.1:5432"},
			"failover: connection to the old writer db-1 (10.0.0.1:5432) closed: the cluster failed over to db-2 (a transaction open on it was rolled back)"},
		{&failover.CutError{Left: "db-3", Addr: "10.0.0.3:5432"},
			"failover: connection to db-3 (10.0.0.3:5432) closed: the instance left the cluster's topology (a transaction open on it was rolled back)"},
		{&failover.CutError{Down: "db-2", Why: "timeout", Addr: "10.0.0.2:5432"},
			"failover: connection to 10.0.0.2:5432 closed: reader db-2 down (timeout), it stopped answering (a transaction open on it was rolled back)"},
		{&failover.HoldError{Host: "orders.cluster-abc.us-east-1.rds.amazonaws.com", Waited: 30 * time.Second, Err: context.DeadlineExceeded},
			"failover: connect to orders.cluster-abc.us-east-1.rds.amazonaws.com held for 30s while the cluster had no writer, and none appeared: context deadline exceeded"},
		{&failover.NotWriterError{Host: "orders.cluster-abc.us-east-1.rds.amazonaws.com", Addr: "10.0.0.1:5432", Why: "in hot standby"},
			"failover: connection by the writer endpoint orders.cluster-abc.us-east-1.rds.amazonaws.com reached 10.0.0.1:5432, which is not the writer (in hot standby): refused"},
		{&failover.HoldError{Host: "orders.cluster-ro-abc.us-east-1.rds.amazonaws.com", Waited: 5 * time.Second, Reader: true, Err: context.DeadlineExceeded},
			"failover: connect to orders.cluster-ro-abc.us-east-1.rds.amazonaws.com held for 5s: no reader in the topology: context deadline exceeded"},
		{&failover.HoldError{Host: "ro", Waited: time.Second, Reader: true, Readers: 2, Err: context.Canceled},
			"failover: connect to ro held for 1s: all 2 readers lag beyond MaxLag: context canceled"},
		{&failover.WriterRegionError{Host: "orders.cluster-def.us-west-2.rds.amazonaws.com", Region: "us-west-2", WriterRegion: "us-east-1", Writer: "orders-1", Err: errors.New("ERROR: cannot execute INSERT in a read-only transaction (SQLSTATE 25006)")},
			"failover: write through orders.cluster-def.us-west-2.rds.amazonaws.com refused: it is the cluster endpoint of us-west-2, a secondary Region of the global cluster, inactive while the writer (orders-1) is in us-east-1; write through the global writer endpoint: ERROR: cannot execute INSERT in a read-only transaction (SQLSTATE 25006)"},
		{&failover.WriterRegionError{Host: "orders.global-xyz.global.rds.amazonaws.com", Region: "us-east-1", WriterRegion: "us-west-2", Writer: "orders-3", OutOfHome: true},
			"failover: write through orders.global-xyz.global.rds.amazonaws.com refused: the writer (orders-3) is in us-west-2, outside the home Region us-east-1, and the pool is read-only meanwhile (OutOfHomeReadOnly)"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// TestErrorsUnwrap: the errors that carry a cause give it to errors.Is
// and errors.As (the classifier reads a hold's and a reader wait's
// context error, and a cut's network error, through them).
func TestErrorsUnwrap(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want error
	}{
		{&failover.HoldError{Err: context.DeadlineExceeded}, context.DeadlineExceeded},
		{&failover.HoldError{Err: context.Canceled}, context.Canceled},
		{&failover.HoldError{Reader: true, Err: context.DeadlineExceeded}, context.DeadlineExceeded},
		{&failover.CutError{OldWriter: "a", NewWriter: "b", Err: io.EOF}, io.EOF},
	} {
		if !errors.Is(fmt.Errorf("connect: %w", tt.err), tt.want) {
			t.Errorf("errors.Is(%T, %v) = false", tt.err, tt.want)
		}
	}
}

// TestHoldSafeToRetry: a hold that failed, of the writer endpoint or of a
// reader pool, sent nothing, as pgconn.SafeToRetry reads it through the
// error chain.
func TestHoldSafeToRetry(t *testing.T) {
	t.Parallel()
	for _, e := range []*failover.HoldError{{Err: context.DeadlineExceeded}, {Reader: true, Err: context.DeadlineExceeded}} {
		if err := fmt.Errorf("connect: %w", e); !pgconn.SafeToRetry(err) {
			t.Errorf("pgconn.SafeToRetry(%v) = false", err)
		}
	}
}

// TestRunnerRerunsFailoverErrors: a transaction whose run failed with a
// hold, a refusal, a reader wait or a cut before COMMIT was sent is run
// again by the factory's runner (nothing of it committed), and one whose
// hold the caller canceled is not. Each case has a factory of its own, so
// that its failure meets a full retry budget (the default,
// retry.DemandBudget, refuses a rerun after three failures in a row of
// one factory).
func TestRunnerRerunsFailoverErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tt := range []struct {
		err  error
		runs int
	}{
		{&failover.HoldError{Host: "h", Err: context.DeadlineExceeded}, 2},
		{&failover.NotWriterError{Host: "h", Addr: "a", Why: "in hot standby"}, 2},
		{&failover.HoldError{Host: "h", Reader: true, Err: context.DeadlineExceeded}, 2},
		{&failover.CutError{OldWriter: "a", NewWriter: "b", Addr: "10.0.0.1:5432", Err: io.EOF}, 2},
		{&failover.HoldError{Host: "h", Err: context.Canceled}, 1},
	} {
		f, err := holdfast.New(holdfast.WithFailover(failover.Config{}),
			holdfast.WithTxPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Multiplier: 1, MaxInterval: time.Millisecond}))
		if err != nil {
			t.Fatal(err)
		}
		db := &failingBegin{err: fmt.Errorf("begin: %w", tt.err)}
		err = f.RunTx(ctx, db, pgx.TxOptions{}, func(pgx.Tx) error { return nil })
		f.Close()
		runs := db.runs
		if runs != tt.runs || (tt.runs == 2) != (err == nil) {
			t.Errorf("RunTx, first run failing with %v: %d runs, %v; want %d", tt.err, runs, err, tt.runs)
		}
	}
}

// A pool on a host whose instance endpoints cannot be derived (an IP
// address, a name of your own) is refused at Configure unless the
// template is given: misconfiguration is never silent.
func TestConfigureNeedsTemplate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		host, template string
		ok             bool
	}{
		{"orders.cluster-abc.us-east-1.rds.amazonaws.com", "", true},
		{"10.0.0.1", "", false},
		{"db.internal.example.com", "", false},
		{"db.internal.example.com", "?.db.internal.example.com", true},
	} {
		f, err := holdfast.New(holdfast.WithFailover(failover.Config{InstanceTemplate: tt.template}))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgxpool.ParseConfig("postgres://u@" + tt.host + ":5432/db")
		if err != nil {
			t.Fatal(err)
		}
		err = f.Configure(cfg)
		var ce *holdfast.ConfigError
		switch {
		case tt.ok && err != nil:
			t.Errorf("Configure(%s, template %q) = %v, want nil", tt.host, tt.template, err)
		case !tt.ok && (!errors.As(err, &ce) || ce.Field != "WithFailover"):
			t.Errorf("Configure(%s) = %v, want a *holdfast.ConfigError for WithFailover", tt.host, err)
		}
		f.Close()
	}
	if _, err := holdfast.New(holdfast.WithFailover(failover.Config{HoldTimeout: -1})); !errors.As(err, new(*holdfast.ConfigError)) {
		t.Errorf("New with a negative HoldTimeout: %v, want a ConfigError", err)
	}
}

// failingBegin fails its first BEGIN with err, then begins transactions
// that commit.
type failingBegin struct {
	err  error
	runs int
}

func (b *failingBegin) BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error) {
	if b.runs++; b.runs == 1 {
		return nil, b.err
	}
	return committingTx{}, nil
}

type committingTx struct{ pgx.Tx }

func (committingTx) Commit(context.Context) error   { return nil }
func (committingTx) Rollback(context.Context) error { return nil }
func (committingTx) Conn() *pgx.Conn                { return nil }
