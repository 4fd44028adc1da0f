package outagetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
)

// Default addresses of the two servers of a [MultiAZ] or a [Pair]:
// failovertest's first two (127.0.0.11 and 127.0.0.21).
const (
	DefaultPrimaryHost = failovertest.DefaultWriterHost
	DefaultStandbyHost = failovertest.DefaultReplicaHost
)

// The events of the operations, in the order they happen.
const (
	// MultiAZ.Failover: the old primary's address stops answering (its
	// packets are dropped) and its server is stopped.
	EventSilent = "primary silent"
	// Pair.Demote: the old primary shuts down fast (its clients get
	// 57P01).
	EventStopped = "primary stopped"
	// Both: the standby takes writes.
	EventPromoted = "standby promoted"
	// Pair.Demote: the old primary streams from the new one, a hot
	// standby that answers reads and refuses writes (25006).
	// MultiAZ.Failover with Rejoin: the old primary is the new standby,
	// not readable (57P03), and its address answers again.
	EventRejoined = "old primary back as standby"
	// Both: the name resolves to the new primary.
	EventDNS = failovertest.EventDNS
	// Pair.Demote with PairConfig.VIP: the VIP leads to the new primary,
	// and its connections to the old one are reset.
	EventVIP = "VIP moved"
)

// MultiAZConfig configures [StartMultiAZ]. The zero value is the instance
// "orders" in DefaultAccount and DefaultRegion on DefaultPrimaryHost and
// DefaultStandbyHost, with a client-side DNS cache of DefaultTTL.
type MultiAZConfig struct {
	// Name, Account and Region shape the endpoint,
	// NAME.ACCOUNT.REGION.rds.amazonaws.com, and the servers' ids, the
	// availability zones REGIONa and REGIONb.
	Name, Account, Region string
	// PrimaryHost and StandbyHost are the loopback addresses of the
	// servers and of their fronts (see [MultiAZ]). When they cannot be
	// bound (macOS without aliases) everything listens on 127.0.0.1, each
	// on a port of its own; the resolver answers "ip:port", so clients
	// see no difference.
	PrimaryHost, StandbyHost string
	// TTL is the client-side DNS cache's TTL ([MultiAZ].Cache); negative
	// caches nothing. Default DefaultTTL.
	TTL time.Duration
	// TLS turns TLS on on both servers: they present a certificate for
	// the endpoint, signed by a throwaway CA (CAFile), and DSN and
	// PoolConfig verify it (sslmode=verify-full).
	TLS bool
}

// MultiAZ is an RDS Multi-AZ DB instance (not a cluster) on one machine:
// a primary and a standby in another availability zone, kept in sync by
// physical streaming replication in synchronous mode, behind one
// endpoint name in a fake DNS. The standby is not readable
// (hot_standby off: a connection to it is refused with 57P03, "the
// database system is not accepting connections"), and no server has a
// topology function: a client knows the instance by its name only.
// [MultiAZ.Failover] plays a failover as RDS does one: the primary's
// address stops answering, the standby is promoted, and the endpoint's
// DNS record moves to it. Close it when done. A MultiAZ is safe for
// concurrent use; failovers are serialised.
//
// Each server is reached through a front of its own ([MultiAZ.Addr]):
// a TCP forwarder in the test process, on the server's loopback address
// and a port of its own, which is what the DNS answers. It is what goes
// silent in a failover.
type MultiAZ struct {
	// Endpoint is the instance's endpoint,
	// NAME.ACCOUNT.REGION.rds.amazonaws.com.
	Endpoint string
	// Resolver is the fake DNS holding the endpoint; Cache is a
	// client-side cache in front of it with MultiAZConfig.TTL, the
	// LookupFunc of PoolConfig.
	Resolver *bluegreentest.Resolver
	Cache    *bluegreentest.Cache
	// SingleIP reports that everything listens on 127.0.0.1.
	SingleIP bool
	// CAFile is the path of the CA certificate (PEM) with
	// MultiAZConfig.TLS, "" without: the sslrootcert of DSN.
	CAFile string

	*duo
	fronts map[string]*front // by server id
}

// StartMultiAZ starts the primary (initdb), the standby (pg_basebackup
// from it, hot_standby off), a front before each, and publishes the
// endpoint. ctx bounds the start (a few seconds).
func StartMultiAZ(ctx context.Context, cfg MultiAZConfig) (*MultiAZ, error) {
	cfg.Name = cmp.Or(cfg.Name, DefaultName)
	cfg.Account = cmp.Or(cfg.Account, DefaultAccount)
	cfg.Region = cmp.Or(cfg.Region, DefaultRegion)
	endpoint := cfg.Name + "." + cfg.Account + "." + cfg.Region + ".rds.amazonaws.com"
	d, err := startDuo(ctx, duoConfig{
		name:  endpoint,
		ids:   [2]string{cfg.Region + "a", cfg.Region + "b"},
		hosts: [2]string{cmp.Or(cfg.PrimaryHost, DefaultPrimaryHost), cmp.Or(cfg.StandbyHost, DefaultStandbyHost)},
		ttl:   cfg.TTL,
		tls:   cfg.TLS,
		conf: func(syncStandby bool) map[string]string {
			s := pgnode.Settings(syncStandby)
			s["hot_standby"] = "off" // RDS's standby is not readable
			return s
		},
	})
	if err != nil {
		return nil, fmt.Errorf("fakes/outagetest: start Multi-AZ instance: %w", err)
	}
	m := &MultiAZ{Endpoint: endpoint, Resolver: d.resolver, Cache: d.cache, SingleIP: d.singleIP, CAFile: d.caFile,
		duo: d, fronts: map[string]*front{}}
	for _, n := range d.nodes {
		f, err := newFront(n.Host, n.Addr(), frontHooks{})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("fakes/outagetest: start Multi-AZ instance: front of %s: %w", n.ID, err), m.Close())
		}
		m.fronts[n.ID] = f
	}
	m.Resolver.Set(endpoint, m.fronts[d.nodes[0].ID].addr)
	return m, nil
}

// Addr returns where clients reach server id, "ip:port": its front, what
// the endpoint resolves to while it is the primary ("" for an unknown
// id).
func (m *MultiAZ) Addr(id string) string {
	if f := m.fronts[id]; f != nil {
		return f.addr
	}
	return ""
}

// FailoverScenario configures [MultiAZ.Failover]. Zero durations are
// zero: use [DemoFailover] for a demo's timings.
type FailoverScenario struct {
	// Detect is the time from the primary going silent to the standby's
	// promotion (RDS's detection and its decision); at least the old
	// server's shutdown (0.2 to 0.5 s).
	Detect time.Duration
	// DNSLag is the time from the promotion to the endpoint's record
	// moving to the new primary. RDS moves it 60 to 120 s after the
	// failure in all; a client's DNS cache adds up to its TTL.
	DNSLag time.Duration
	// Rejoin makes the old primary the new standby once the record
	// moved, as RDS replaces it: started again as a standby of the new
	// primary (re-created by pg_basebackup if it cannot follow), not
	// readable, synchronous, its address answering again (and resetting
	// the connections it had frozen), so that a second failover can go
	// back. Without it the old primary stays down and
	// silent, the new one commits alone, and a second failover fails.
	Rejoin bool
	// OnEvent, when set, is called after each step, on the goroutine
	// running Failover; it must not block.
	OnEvent func(Event)
}

// DemoFailover returns the timings of a demo: detection 5 s and DNS lag
// 15 s, the record moving 20 s after the failure (RDS: 60 to 120 s), and
// Rejoin.
func DemoFailover() FailoverScenario {
	return FailoverScenario{Detect: 5 * time.Second, DNSLag: 15 * time.Second, Rejoin: true}
}

// Failover plays a failover of the instance and returns when it is done
// (the old primary back as the standby, with Rejoin) or ctx ends:
//
//  1. The primary's address goes silent (EventSilent): its front stops
//     accepting, and the kernel drops each new connection's SYN (a dial
//     hangs until the client gives up, "i/o timeout"), while the
//     connections it had are frozen, open and answering nothing, as
//     when a host's packets are dropped rather than refused. Its server
//     is stopped at once (immediate), the host lost.
//  2. After Detect the standby is promoted and takes writes
//     (EventPromoted); it has every acknowledged commit (synchronous
//     replication).
//  3. DNSLag after the promotion the endpoint resolves to the new
//     primary's address (EventDNS); clients see it once their cached
//     answer expires.
//  4. With Rejoin, the old primary is re-created as the new standby
//     (EventRejoined).
//
// It blocks; run it on a goroutine of your own to drive a workload
// meanwhile.
func (m *MultiAZ) Failover(ctx context.Context, s FailoverScenario) (Result, error) {
	return m.operate("Multi-AZ failover", s.OnEvent, func(t *timeline, old, nw *pgnode.Node) error {
		return m.failover(ctx, s, t, old, nw)
	})
}

func (m *MultiAZ) failover(ctx context.Context, s FailoverScenario, t *timeline, old, nw *pgnode.Node) error {
	if err := m.fronts[old.ID].silence(); err != nil {
		return fmt.Errorf("silencing %s: %w", old.ID, err)
	}
	silent := time.Now()
	t.emit(EventSilent, old.ID)
	// Its host is lost: whatever it does now, no client sees it. It shuts
	// down cleanly, so that its last WAL reaches the standby and it can
	// rejoin as a standby without a base backup.
	if err := old.Stop(ctx, "fast"); err != nil {
		return fmt.Errorf("stopping %s: %w", old.ID, err)
	}

	if err := pgnode.Sleep(ctx, time.Until(silent.Add(s.Detect))); err != nil {
		return err
	}
	promoted, err := m.promote(ctx, t, nw)
	if err != nil {
		return err
	}

	if err := pgnode.Sleep(ctx, time.Until(promoted.Add(s.DNSLag))); err != nil {
		return err
	}
	m.Resolver.Set(m.Endpoint, m.fronts[nw.ID].addr)
	t.emit(EventDNS, nw.ID)

	if !s.Rejoin {
		return nil
	}
	return m.rejoin(ctx, t, old, nw, func() error { return m.fronts[old.ID].answer(old.Addr()) })
}

// Close stops the fronts (closing every connection through them) and
// the servers, and removes their directories.
func (m *MultiAZ) Close() error {
	for _, f := range m.fronts {
		f.close()
	}
	return m.duo.close()
}
