package failovermon

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/compose"
)

// This file is reader routing (failover.Config.Readers), part of the
// failover layer of a pool on the reader endpoint:
//
//	Route       each dial goes to a reader of the monitor's topology, by
//	            address (TLS still verifies, and IAM tokens are for, the
//	            endpoint name): the one with the fewest of the pool's
//	            connections (dials under way included), or one at random;
//	            a reader lagging beyond MaxLag is left out; with none, the
//	            writer or a bounded hold (ReaderConfig.Hold)
//	onChange    a reader that leaves: its connections are cut (as every
//	            pool's, InstancesLeft); a reader that joins: the surplus
//	            idle connections of the busiest readers are closed, and the
//	            pool's new ones go to it (rebalance)
//	health      a reader the monitor finds down (its pings, each
//	            HeartbeatInterval while a reader pool is served) gets no new
//	            connection and its connections are cut (every pool's,
//	            ReadersDown); back, the pool rebalances onto it (ReadersBack)

// readerRouting is a reader pool's routing state; its maps are guarded by
// the layer's mu.
type readerRouting struct {
	cfg failover.ReaderConfig
	// region: a pool on a Region's reader endpoint of an Aurora Global
	// Database is balanced over that Region's readers only.
	region string
	// pending: the reader chosen for a connection's dial, until the dial
	// reaches it (dialed) or the connection closes; a dial that never
	// completes is forgotten after pendingFor.
	pending map[compose.Conn]pick
}

type pick struct {
	addr string
	at   time.Time
}

// pendingFor is how long a chosen reader counts for a dial that never
// reported back (it failed: the next dial chooses again).
const pendingFor = 30 * time.Second

// firstTopologyWait bounds how long a reader pool's dial waits for the
// monitor's first topology read (its connections are opened at once when
// the pool starts: by DNS they would pile on one reader).
const firstTopologyWait = 3 * time.Second

func newReaderRouting(rc failover.ReaderConfig) *readerRouting {
	if rc.HoldTimeout <= 0 {
		rc.HoldTimeout = defaultReaderHold
	}
	return &readerRouting{cfg: rc, pending: map[compose.Conn]pick{}}
}

// usable returns the readers of s that take new connections, sorted.
func (r *readerRouting) usable(s *Snapshot) []string {
	out := make([]string, 0, len(s.Readers))
	for a := range s.Readers {
		if a == s.WriterAddr {
			continue // a snapshot between the first read and the writer's adoption
		}
		if s.ReadersDown[a] {
			continue // it stopped answering the monitor
		}
		if r.region != "" && s.Regions != nil && s.Regions[a] != r.region {
			continue // another Region's (a global cluster)
		}
		if lag, ok := s.Lag[a]; ok && r.cfg.MaxLag > 0 && lag > r.cfg.MaxLag {
			continue
		}
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// routeReader returns the address of c's dial by the reader endpoint.
func (fo *Layer) routeReader(ctx context.Context, c compose.Conn, host, addr string) (string, error) {
	r := fo.rd
	start := time.Now()
	var first, hold <-chan time.Time
	for {
		s := fo.m.Snapshot()
		if s.Off {
			return addr, nil // no topology: the endpoint's DNS
		}
		if s.Writer == "" { // not read yet: wait for the first read, bounded
			if first == nil {
				t := time.NewTimer(firstTopologyWait)
				defer t.Stop()
				first = t.C
			}
			select {
			case <-s.Changed:
				continue
			case <-first:
				return addr, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		if cands := r.usable(s); len(cands) > 0 {
			return fo.choose(c, cands), nil
		}
		if !r.cfg.Hold {
			if s.WriterAddr != "" && !s.Down {
				return s.WriterAddr, nil
			}
			return addr, nil
		}
		if hold == nil {
			t := time.NewTimer(r.cfg.HoldTimeout)
			defer t.Stop()
			hold = t.C
		}
		select {
		case <-s.Changed:
		case <-hold:
			return "", &failover.HoldError{Host: host, Waited: time.Since(start), Reader: true, Readers: len(s.Readers), Err: context.DeadlineExceeded}
		case <-ctx.Done():
			return "", &failover.HoldError{Host: host, Waited: time.Since(start), Reader: true, Readers: len(s.Readers), Err: ctx.Err()}
		}
	}
}

// choose picks c's reader among cands and counts it as pending.
func (fo *Layer) choose(c compose.Conn, cands []string) string {
	r := fo.rd
	now := time.Now()
	fo.mu.Lock()
	defer fo.mu.Unlock()
	var a string
	if r.cfg.Strategy == failover.Random {
		a = cands[rand.IntN(len(cands))]
	} else {
		counts := fo.countsLocked(now)
		best, ties := -1, 0
		for _, cand := range cands {
			switch n := counts[cand]; {
			case best < 0 || n < best:
				best, ties, a = n, 1, cand
			case n == best:
				ties++
				if rand.IntN(ties) == 0 { // uniform among ties
					a = cand
				}
			}
		}
	}
	r.pending[c] = pick{addr: a, at: now}
	return a
}

// countsLocked returns the pool's connections by server address, the
// dials under way to a chosen reader included; it forgets stale picks.
// fo.mu is held.
func (fo *Layer) countsLocked(now time.Time) map[string]int {
	counts := make(map[string]int, 8)
	for c := range fo.live {
		if _, p := fo.rd.pending[c]; !p { // a redial of a live one: counted by its pick
			counts[c.Server()]++
		}
	}
	for c, p := range fo.rd.pending {
		if now.Sub(p.at) > pendingFor {
			delete(fo.rd.pending, c)
			continue
		}
		counts[p.addr]++
	}
	return counts
}

// rebalance retires the surplus connections of the busiest readers so
// that the pool's new connections go to the readers that joined: each
// reader keeps at most its fair share (rounded up) of the pool's reader
// connections. The idle ones are closed now (one pass over them), the
// ones in use are destroyed when next acquired, within retireFor (the
// eviction's quota); pgxpool dials their replacements, which the routing
// sends to the readers with the fewest.
func (fo *Layer) rebalance() {
	pool := fo.comp.Pool()
	if pool == nil {
		return
	}
	s := fo.m.Snapshot()
	cands := fo.rd.usable(s)
	if len(cands) < 2 {
		return
	}
	fo.mu.Lock()
	if fo.left {
		fo.mu.Unlock()
		return
	}
	counts := fo.countsLocked(time.Now())
	fo.mu.Unlock()
	total := 0
	for _, a := range cands {
		total += counts[a]
	}
	fair := (total + len(cands) - 1) / len(cands)
	surplus := map[string]int{}
	for _, a := range cands {
		if n := counts[a] - fair; n > 0 {
			surplus[a] = n
		}
	}
	if len(surplus) == 0 {
		return
	}
	closed := compose.CloseIdle(pool, func(a string) bool {
		if surplus[a] > 0 {
			surplus[a]--
			return true
		}
		return false
	})
	// The surplus in use is retired when next acquired.
	later := 0
	for _, n := range surplus {
		later += n
	}
	fo.comp.Retire(surplus) // the eviction destroys them when next acquired
	if closed+later > 0 {
		fo.log.LogAttrs(context.Background(), slog.LevelInfo, "failover: readers joined or came back; surplus connections of the busiest readers retired (idle ones now, the others when next acquired), so that new ones go to the new readers",
			slog.String("server.address", fo.host), slog.Int("closed", closed), slog.Int("retire_when_acquired", later))
	}
}

// retire ends the pool's connections to readers that lag beyond MaxLag,
// without failing what runs on them: the idle ones are closed now, the
// others are destroyed when next acquired (the eviction's PrepareConn),
// so that no read is served there after they finish.
func (fo *Layer) retire(addrs []string) {
	fo.mu.Lock()
	left := fo.left
	fo.mu.Unlock()
	if left {
		return
	}
	for _, a := range addrs {
		fo.comp.Gone(a) // the eviction destroys the others when next acquired
	}
	pool := fo.comp.Pool()
	if pool == nil {
		return
	}
	compose.CloseIdle(pool, func(a string) bool { return slices.Contains(addrs, a) })
	fo.log.LogAttrs(context.Background(), slog.LevelInfo, "failover: connections to readers lagging beyond MaxLag retired (idle ones closed, the others when released)",
		slog.String("server.address", fo.host), slog.Any("addrs", addrs))
}
