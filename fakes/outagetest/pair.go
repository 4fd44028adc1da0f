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

// DefaultPairName is the host name of a [Pair]'s primary.
const DefaultPairName = "primary.orders.internal"

// DefaultVIPHost is the address of a [Pair]'s VIP: failovertest's third
// (127.0.0.31).
const DefaultVIPHost = failovertest.DefaultThirdHost

// PairConfig configures [StartPair]. The zero value is a pair on
// DefaultPrimaryHost and DefaultStandbyHost whose primary is
// DefaultPairName in the DNS, with a client-side cache of DefaultTTL.
type PairConfig struct {
	// Name is the host name clients reach the primary by. Default
	// DefaultPairName.
	Name string
	// PrimaryHost and StandbyHost are the servers' loopback addresses;
	// VIPHost the VIP's (default DefaultVIPHost). When one cannot be
	// bound (macOS without aliases) everything listens on 127.0.0.1, each
	// on a port of its own.
	PrimaryHost, StandbyHost, VIPHost string
	// VIP puts a virtual IP before the pair: Name resolves to the VIP's
	// fixed address, and the VIP leads to the primary (a TCP forwarder,
	// see [Pair]). Without it, Name resolves to the primary's own address,
	// and moves.
	VIP bool
	// TTL is the client-side DNS cache's TTL ([Pair].Cache); negative
	// caches nothing. Default DefaultTTL.
	TTL time.Duration
	// TLS turns TLS on on both servers: they present a certificate for
	// Name, signed by a throwaway CA (CAFile), and DSN and PoolConfig
	// verify it (sslmode=verify-full).
	TLS bool
}

// Pair is a primary behind a DNS name or a VIP, with a readable hot
// standby, as Patroni or a self-managed pair runs one: two PostgreSQL
// servers kept in sync by physical streaming replication in synchronous
// mode. [Pair.Demote] plays a switchover that demotes the primary to a
// read-only standby of the new one, and the name (or the VIP) moving to
// the new primary some time after, or only when told
// ([DemoteScenario].Hold, [Pair.MoveName]). A client that connected to
// the demoted server meanwhile keeps connections that answer reads and
// refuse writes with 25006 for as long as it keeps them. Close it when
// done. A Pair is safe for concurrent use; its operations are
// serialised.
//
// The VIP (PairConfig.VIP) is a TCP forwarder in the test process on
// one fixed address. When it moves, it leads new connections to the new
// primary and resets those it relayed to the old one, as clients of an
// address that another host took over see their next segment answered
// with RST.
type Pair struct {
	// Name is the host name of the primary.
	Name string
	// VIP is the VIP's address, "ip:port", with PairConfig.VIP; "" without.
	VIP string
	// Resolver is the fake DNS holding Name; Cache is a client-side
	// cache in front of it with PairConfig.TTL, the LookupFunc of
	// PoolConfig.
	Resolver *bluegreentest.Resolver
	Cache    *bluegreentest.Cache
	// SingleIP reports that everything listens on 127.0.0.1.
	SingleIP bool
	// CAFile is the path of the CA certificate (PEM) with PairConfig.TLS,
	// "" without: the sslrootcert of DSN.
	CAFile string

	*duo
	vip *front // nil without PairConfig.VIP
}

// StartPair starts the primary (initdb), the standby (pg_basebackup from
// it), the VIP with PairConfig.VIP, and publishes the name. ctx bounds
// the start (a few seconds). The servers' ids are "pg-1" (the first
// primary) and "pg-2".
func StartPair(ctx context.Context, cfg PairConfig) (*Pair, error) {
	name := cmp.Or(cfg.Name, DefaultPairName)
	hosts := [2]string{cmp.Or(cfg.PrimaryHost, DefaultPrimaryHost), cmp.Or(cfg.StandbyHost, DefaultStandbyHost)}
	vipHost := cmp.Or(cfg.VIPHost, DefaultVIPHost)
	single := cfg.VIP && pgnode.CanBind(vipHost) != nil
	if single {
		hosts = [2]string{"127.0.0.1", "127.0.0.1"}
	}
	d, err := startDuo(ctx, duoConfig{name: name, ids: [2]string{"pg-1", "pg-2"}, hosts: hosts,
		ttl: cfg.TTL, tls: cfg.TLS, conf: pgnode.Settings})
	if err != nil {
		return nil, fmt.Errorf("fakes/outagetest: start pair: %w", err)
	}
	single = single || d.singleIP
	p := &Pair{Name: name, Resolver: d.resolver, Cache: d.cache, SingleIP: single, CAFile: d.caFile, duo: d}
	addr := d.nodes[0].Addr()
	if cfg.VIP {
		if single {
			vipHost = "127.0.0.1"
		}
		if p.vip, err = newFront(vipHost, addr, frontHooks{}); err != nil {
			return nil, errors.Join(fmt.Errorf("fakes/outagetest: start pair: VIP: %w", err), p.Close())
		}
		p.VIP, addr = p.vip.addr, p.vip.addr
	}
	p.Resolver.Set(name, addr)
	return p, nil
}

// Addr returns where server id listens, "ip:port" ("" for an unknown
// id).
func (p *Pair) Addr(id string) string {
	if n := p.node(id); n != nil {
		return n.Addr()
	}
	return ""
}

// DemoteScenario configures [Pair.Demote]. Zero durations are zero: use
// [DemoDemote] for a demo's timings.
type DemoteScenario struct {
	// NameLag is the time from the promotion to the name (or the VIP)
	// moving to the new primary; it does not move before the old
	// primary is back as a standby.
	NameLag time.Duration
	// Hold keeps the name (or the VIP) on the demoted server until
	// [Pair.MoveName]: Demote returns once the old primary is back as a
	// standby.
	Hold bool
	// OnEvent, when set, is called after each step, on the goroutine
	// running Demote; it must not block.
	OnEvent func(Event)
}

// DemoDemote returns the timings of a demo: the name moves 5 s after
// the promotion.
func DemoDemote() DemoteScenario { return DemoteScenario{NameLag: 5 * time.Second} }

// Demote plays a switchover that demotes the primary and returns when it
// is done (the name moved, or the old primary back as a standby with
// Hold) or ctx ends:
//
//  1. The primary shuts down fast (EventStopped): its clients get 57P01
//     and new connections are refused. Its last WAL reaches the standby
//     (a fast shutdown waits for it).
//  2. The standby is promoted and takes writes (EventPromoted).
//  3. The old primary starts again as a hot standby of the new one
//     (EventRejoined): it answers reads, refuses writes with 25006 ("cannot
//     execute … in a read-only transaction"), and the new primary's
//     commits wait for it (synchronous).
//  4. NameLag after the promotion the name resolves to the new primary
//     (EventDNS), or the VIP leads to it and resets its connections to
//     the old one (EventVIP). Not with Hold.
//
// A second Demote switches back.
func (p *Pair) Demote(ctx context.Context, s DemoteScenario) (Result, error) {
	return p.operate("demote", s.OnEvent, func(t *timeline, old, nw *pgnode.Node) error {
		return p.demote(ctx, s, t, old, nw)
	})
}

func (p *Pair) demote(ctx context.Context, s DemoteScenario, t *timeline, old, nw *pgnode.Node) error {
	if err := old.Stop(ctx, "fast"); err != nil {
		return fmt.Errorf("stopping %s: %w", old.ID, err)
	}
	t.emit(EventStopped, old.ID)
	promoted, err := p.promote(ctx, t, nw)
	if err != nil {
		return err
	}
	if err := p.rejoin(ctx, t, old, nw, nil); err != nil {
		return err
	}
	if s.Hold {
		return nil
	}
	if err := pgnode.Sleep(ctx, time.Until(promoted.Add(s.NameLag))); err != nil {
		return err
	}
	t.emit(p.move(old, nw), nw.ID)
	return nil
}

// move points the name, or the VIP, at nw and returns the event's name.
func (p *Pair) move(old, nw *pgnode.Node) string {
	if p.vip != nil {
		p.vip.setTarget(nw.Addr())
		if old != nil {
			p.vip.reset(old.Addr())
		}
		return EventVIP
	}
	p.Resolver.Set(p.Name, nw.Addr())
	return EventDNS
}

// MoveName points the name at the primary now, or the VIP (resetting its
// connections to the other server), and returns the event (EventDNS or
// EventVIP): the end of a Demote with Hold. It waits for an operation
// under way.
func (p *Pair) MoveName() Event {
	p.op.Lock()
	defer p.op.Unlock()
	nw, old := p.roles()
	t := &timeline{}
	t.emit(p.move(old, nw), nw.ID)
	return t.res.Events[0]
}

// Close stops the VIP (closing its connections) and the servers, and
// removes their directories.
func (p *Pair) Close() error {
	if p.vip != nil {
		p.vip.close()
	}
	return p.duo.close()
}
