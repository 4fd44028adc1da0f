package failover

import (
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/typerule"
)

// HoldError says that a new connection by the writer endpoint was held
// while the writer was down and no new writer was known, and that none
// appeared within Config.HoldTimeout or the caller's context. Nothing was
// sent: it is retryable (Rule: Transient), unless the caller's context
// ended it.
type HoldError struct {
	Host   string
	Waited time.Duration
	Err    error // context.DeadlineExceeded or the caller's context error
}

func (e *HoldError) Error() string {
	return fmt.Sprintf("failover: connect to %s held for %v while the cluster had no writer, and none appeared: %v",
		e.Host, e.Waited.Round(time.Millisecond), e.Err)
}

// Unwrap returns Err.
func (e *HoldError) Unwrap() error { return e.Err }

// NotWriterError says that a new connection by the writer endpoint reached
// a server that is not the writer (stale DNS after a failover: the old
// writer, back as a reader, or a reader): holdfast refused it before any
// statement, and its retry goes to the writer. The factory's connect
// layer retries it itself, under its retry policy: a caller sees it when
// those retries are spent. Retryable (Rule: Transient).
type NotWriterError struct {
	Host string // the endpoint asked for
	Addr string // the server reached
	Why  string // "in hot standby", "a reader in the topology", "read-only"
}

func (e *NotWriterError) Error() string {
	return fmt.Sprintf("failover: connection by the writer endpoint %s reached %s, which is not the writer (%s): refused", e.Host, e.Addr, e.Why)
}

// CutError says that a connection to the old writer was closed because
// the cluster failed over: a statement or transaction on it did not
// complete. Nothing is resent. A transaction open on it was rolled back:
// it is Transient, and running the whole transaction again (holdfast's
// Factory.RunTx and sqldb.RunTx do) goes to the new writer.
// When what was in flight could commit by itself — a COMMIT, an autocommit
// statement — its outcome is unknown, as with any broken connection: the
// caller gets a *holdfast.OutcomeUnknownError wrapping the CutError, Fatal
// "outcome-unknown", never to be resent blindly; on a reader (a server in
// hot standby, where nothing commits) an error wrapping the CutError that
// holdfast.Factory.Classify says is Transient "lost-on-standby".
//
// A connection to an instance that left the cluster's topology is cut the
// same way; OldWriter and NewWriter are then empty and Left is its id. So
// is a connection to a reader that stopped answering the monitor (crashed,
// hung): Down is its id, and Why what the monitor's probe saw.
type CutError struct {
	OldWriter string // server id
	NewWriter string // server id
	Left      string // server id of an instance that left the topology
	Down      string // server id of a reader found down
	Why       string // Down: "refused", "reset", "timeout", "EOF", "network error" or "SQLSTATE 57…"
	Addr      string // the server's address
	Err       error  // the network error that surfaced it
}

func (e *CutError) Error() string {
	if e.Down != "" {
		why := ""
		if e.Why != "" {
			why = " (" + e.Why + ")"
		}
		return fmt.Sprintf("failover: connection to %s closed: reader %s down%s, it stopped answering (a transaction open on it was rolled back)",
			e.Addr, e.Down, why)
	}
	if e.NewWriter == "" {
		return fmt.Sprintf("failover: connection to %s (%s) closed: the instance left the cluster's topology (a transaction open on it was rolled back)",
			e.Left, e.Addr)
	}
	return fmt.Sprintf("failover: connection to the old writer %s (%s) closed: the cluster failed over to %s (a transaction open on it was rolled back)",
		e.OldWriter, e.Addr, e.NewWriter)
}

// Unwrap returns Err.
func (e *CutError) Unwrap() error { return e.Err }

// InactiveEndpointError says that a write went through a secondary
// Region's cluster (writer) endpoint of an Aurora Global Database, which
// Aurora keeps inactive while the writer is in another Region: the
// endpoint leads to a read-only instance of its Region, which refused the
// write (Err, a *pgconn.PgError 25006). Nothing was written. It is not
// retryable (Rule: Fatal): the endpoint leads to the same read-only
// instance until the writer comes back to its Region. Write through the
// global writer endpoint, or give the pool failover.FollowWriter
// (InstancePools or holdfast.PoolInstanceMode) to follow the writer
// across Regions. holdfast's transaction runner (Factory.RunTx,
// sqldb.RunTx) returns it; a statement run on the pool directly returns
// the server's 25006 as pgx does, once (the connection is kept, the
// monitor not woken: a read-only instance there is no failover).
type InactiveEndpointError struct {
	Host         string // the pool's endpoint
	Region       string // its Region
	WriterRegion string // the writer's Region now
	Writer       string // the writer's server id now
	Err          error
}

func (e *InactiveEndpointError) Error() string {
	writer := "the writer"
	if e.Writer != "" {
		writer += " (" + e.Writer + ")"
	}
	return fmt.Sprintf("failover: write through %s refused: it is the cluster endpoint of %s, a secondary Region of the global cluster, inactive while %s is in %s; write through the global writer endpoint: %v",
		e.Host, e.Region, writer, e.WriterRegion, e.Err)
}

// Unwrap returns Err.
func (e *InactiveEndpointError) Unwrap() error { return e.Err }

// ErrWriterOutOfHome is matched by every *WriterOutOfHomeError.
var ErrWriterOutOfHome = errors.New("failover: the global cluster's writer is outside the home Region")

// WriterOutOfHomeError says that a write went through a pool meant for
// writes while the Aurora Global Database's writer is outside
// GlobalConfig.HomeRegion, with OutOfHomeReadOnly: the pool reads on the
// home Region's readers, and the one reached refused the write (Err, a
// *pgconn.PgError 25006), or no home reader is up (Err nil). Nothing was
// written, and no connection reached the writer. It is not retryable
// (Rule: Fatal) until the writer comes back home.
type WriterOutOfHomeError struct {
	Host         string // the pool's endpoint
	HomeRegion   string
	WriterRegion string
	Writer       string // the writer's server id
	Err          error
}

func (e *WriterOutOfHomeError) Error() string {
	msg := fmt.Sprintf("failover: write through %s refused: the writer (%s) is in %s, outside the home Region %s, and the pool is read-only meanwhile (OutOfHomeReadOnly)",
		e.Host, e.Writer, e.WriterRegion, e.HomeRegion)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Err.
func (e *WriterOutOfHomeError) Unwrap() error { return e.Err }

// Is matches ErrWriterOutOfHome.
func (e *WriterOutOfHomeError) Is(target error) bool { return target == ErrWriterOutOfHome }

// Rule classifies this package's errors for package classify; holdfast's
// factory installs it with WithFailover. Its verdicts (the reasons are
// what metrics, logs and retry errors show):
//
//	error            class      reason
//	---------------  ---------  -------------------
//	*HoldError       Transient  failover-held
//	*NotWriterError  Transient  failover-not-writer
//	*CutError        Transient  failover-cut
//	*InactiveEndpointError  Fatal  failover-inactive-endpoint
//	*WriterOutOfHomeError   Fatal  failover-writer-out-of-home
//
// A hold the caller's own context canceled is left to the other rules
// (classify: Fatal "canceled"), and so is a *NoReaderError (its Err:
// Transient "timeout", or the caller's cancellation).
func Rule(err error) (classify.Verdict, bool) { return rule(err) }

var rule = typerule.Rule(
	typerule.Wait[*HoldError]("failover-held"),
	typerule.Of[*NotWriterError](classify.Transient, "failover-not-writer"),
	typerule.Of[*CutError](classify.Transient, "failover-cut"),
	typerule.Of[*InactiveEndpointError](classify.Fatal, "failover-inactive-endpoint"),
	typerule.Of[*WriterOutOfHomeError](classify.Fatal, "failover-writer-out-of-home"),
)
