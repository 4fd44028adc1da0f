package failover

import (
	"fmt"
	"strconv"
	"time"
)

// DefaultReaderHold bounds how long a new connection of a reader pool is
// held, with ReaderConfig.WhenNoReader Hold, while no reader is usable.
const DefaultReaderHold = 5 * time.Second

// DefaultReaderRefresh is how often the topology is read while a pool
// with reader routing is served: the reader endpoint's own TTL.
const DefaultReaderRefresh = 5 * time.Second

// ReaderConfig configures reader routing: how the pools on the cluster's
// reader endpoint (NAME.cluster-ro-…, or an alias of it in Config.Aliases)
// spread their connections over the readers of the topology. See "Reader
// routing" in the package doc.
type ReaderConfig struct {
	// Strategy chooses the reader of each new connection:
	// LeastConnections (the default) or Random; ByDNS turns reader
	// routing off (the reader endpoint's DNS answer, as before).
	Strategy ReaderStrategy
	// MaxLag, when positive, leaves out of the choice a reader whose
	// replication lag (Aurora: replica_lag_in_msec) exceeds it, until it
	// catches up, and retires the reader pools' connections to it: idle
	// ones are closed at once, the others when next acquired (those in
	// use finish what they run). The lag is the one of the monitor's last
	// topology read (RefreshInterval below). 0: lag is not considered.
	MaxLag time.Duration
	// WhenNoReader is what a new connection does when the topology names
	// no usable reader (none, or every one lagging): UseWriter (the
	// default, as the reader endpoint itself with no replica) or Hold.
	WhenNoReader NoReader
	// RefreshInterval is how often the monitor reads the topology while
	// it serves a pool with reader routing, when shorter than
	// Config.RefreshInterval: a reader that joins, or starts or stops
	// lagging, is seen within it. Default DefaultReaderRefresh (5 s, the
	// reader endpoint's TTL).
	RefreshInterval time.Duration
	// HoldTimeout bounds the hold of WhenNoReader Hold (the caller's
	// context bounds it too); then the connect fails with a
	// *NoReaderError. Default DefaultReaderHold.
	HoldTimeout time.Duration
}

// ReaderStrategy is how a reader pool's new connection chooses its reader.
type ReaderStrategy int

// The reader strategies.
const (
	// LeastConnections picks the reader with the fewest of this pool's
	// connections (those being dialed included), at random among ties.
	LeastConnections ReaderStrategy = iota
	// Random picks a reader uniformly at random.
	Random
	// ByDNS leaves the choice to the reader endpoint's DNS: no reader
	// routing (connections to a reader that leaves are still cut).
	ByDNS
)

// String returns "least-connections", "random" or "dns".
func (s ReaderStrategy) String() string {
	switch s {
	case LeastConnections:
		return "least-connections"
	case Random:
		return "random"
	case ByDNS:
		return "dns"
	}
	return "ReaderStrategy(" + strconv.Itoa(int(s)) + ")"
}

// NoReader is what a reader pool's new connection does when no reader is
// usable.
type NoReader int

// The choices of ReaderConfig.WhenNoReader.
const (
	// UseWriter connects to the writer.
	UseWriter NoReader = iota
	// Hold waits for a usable reader, at most ReaderConfig.HoldTimeout,
	// then fails with a *NoReaderError.
	Hold
)

// String returns "use-writer" or "hold".
func (n NoReader) String() string {
	switch n {
	case UseWriter:
		return "use-writer"
	case Hold:
		return "hold"
	}
	return "NoReader(" + strconv.Itoa(int(n)) + ")"
}

// Validate reports the first invalid field as a *ConfigError.
func (r ReaderConfig) Validate() error {
	switch {
	case r.Strategy < LeastConnections || r.Strategy > ByDNS:
		return &ConfigError{Pkg: "failover", Field: "Config.Readers.Strategy", Why: fmt.Sprintf("%d: want failover.LeastConnections, Random or ByDNS", int(r.Strategy))}
	case r.WhenNoReader != UseWriter && r.WhenNoReader != Hold:
		return &ConfigError{Pkg: "failover", Field: "Config.Readers.WhenNoReader", Why: fmt.Sprintf("%d: want failover.UseWriter or Hold", int(r.WhenNoReader))}
	case r.MaxLag < 0:
		return &ConfigError{Pkg: "failover", Field: "Config.Readers.MaxLag", Why: "negative"}
	case r.HoldTimeout < 0:
		return &ConfigError{Pkg: "failover", Field: "Config.Readers.HoldTimeout", Why: "negative"}
	case r.RefreshInterval < 0:
		return &ConfigError{Pkg: "failover", Field: "Config.Readers.RefreshInterval", Why: "negative"}
	}
	return nil
}

// NoReaderError is the error of a reader pool's connect held (WhenNoReader
// Hold) while the topology named no usable reader, and none became usable.
type NoReaderError struct {
	Host    string
	Waited  time.Duration
	Readers int // the readers in the topology (all lagging when > 0)
	Err     error
}

func (e *NoReaderError) Error() string {
	why := "no reader in the topology"
	if e.Readers > 0 {
		why = fmt.Sprintf("all %d readers lag beyond MaxLag", e.Readers)
	}
	return fmt.Sprintf("failover: connect to %s held for %v: %s: %v", e.Host, e.Waited.Round(time.Millisecond), why, e.Err)
}

// Unwrap returns Err.
func (e *NoReaderError) Unwrap() error { return e.Err }

// SafeToRetry reports true: nothing was sent.
func (e *NoReaderError) SafeToRetry() bool { return true }
