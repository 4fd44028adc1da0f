package storm

import (
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-db/holdfast/internal/pace"
)

// Hold is the outage hold (issue 30, item 1) on each pod's pool, as the
// simulation models it. Every field is a parameter of the model, so that
// it can follow the engine's values; [DefaultHold] gives the values of
// RESULTS.md.
//
//   - Down. With Pace (the engine's), a failed connect attempt is a sign:
//     the prober checks at once, the connect waiting for its verdict (no
//     retry of its own), and the check finds the pool down. The engine
//     does so for a failed dial or handshake and for a token its password
//     function could not fetch (a retryable failure: internal/conn's
//     tokenHeld). Without Pace (the variants of a schedule), or with
//     NoSignCheck (what the engine did for a token before), a pool is
//     down after DownAfter failed connect attempts in a row, counted
//     across its connects (a success anywhere in the pool resets the
//     count). With BreakDown, at once when the database breaks its open
//     connections (a fast shutdown sends 57P01 to each: the "refusals
//     across connections" of the issue). A token API failure is a connect
//     failure like any other.
//   - Prober. One per pool. With Pace (holdfast's defaults: pace.Engine)
//     its delays are internal/pace's Pacer, the code the engine's prober
//     runs (internal/outage), started when the pool goes down, told how
//     many requests wait (connects held, and requests queued for a pool
//     slot) and of the pool's demand — each request that arrives while it
//     is down (an Acquire that found no connection) and each connect that
//     begins waiting — and asked again at each, as the engine's prober is
//     when a request starts waiting (a sleep ends sooner when the pace is
//     now shorter, with the same jitter draw); the Probe* fields are then
//     unused; and at the database's break the prober makes the check the
//     engine makes at once at a sign (suspect), which finds it down. Without it: its first probe comes ProbeInitial after the
//     pool goes down, each later one Multiplier times the last delay, at
//     most ProbeMax, each delay jittered uniformly by ±ProbeJitter (the
//     formula of retry.Policy's jitter). A probe is one connect attempt;
//     it takes no retry budget and is never refused by it. With
//     ProbeWithHeld a probe is the dial of the oldest connect waiting
//     for the pool (its connection, if it succeeds, goes to the pool),
//     and the prober's own connection (closed once it succeeds) only
//     when none waits; otherwise every probe is the prober's own. The
//     engine does this while the pool is down (internal/outage:
//     Config.Lead, set by internal/conn's addOutage; Layer.byLead offers
//     the step, Layer.wait gives it to a waiting connect): the connect
//     that takes it is whichever waits at the offer, not necessarily the
//     oldest, and the first check after a sign is the prober's own.
//   - Requests. While the pool is down no connect makes an attempt of its
//     own: a connect that starts, a retry that comes due, a connect whose
//     attempt has just failed and one whose admission comes all wait for
//     the prober's "back", within their request's deadline and HoldFor
//     from when they began waiting; one whose wait ends fails (the
//     engine's ErrDatabaseDown). Waiting is charged to no budget. A
//     connect's failure is charged to the budget as its retry loop
//     charges it (the loop's decision to retry is then overridden: the
//     connect waits instead).
//   - Back. When a probe succeeds the pool is up again: the connects
//     waiting are released in the order they began waiting, each with a
//     fresh retry loop, through the pool's admission limit (when the
//     strategy has one).
type Hold struct {
	DownAfter       int           // consecutive failed connect attempts that make a pool down (>= 1)
	BreakDown       bool          // a pool whose connections the database breaks is down at once
	NoSignCheck     bool          // with Pace: no check at a failed attempt's sign (down after DownAfter instead)
	ProbeInitial    time.Duration // the delay of the first probe after the pool goes down
	ProbeMultiplier float64       // each later delay is this times the last (>= 1)
	ProbeMax        time.Duration // the longest delay between probes
	ProbeJitter     float64       // each delay is spread uniformly over ±ProbeJitter of itself (0 to 1)
	HoldFor         time.Duration // the longest a connect waits for "back" (the request's deadline may end it first)
	ProbeWithHeld   bool          // a probe is the dial of the oldest waiting connect, when one waits
	// Pace, when set, is the prober's pace (internal/pace, the code the
	// engine's prober runs): the Probe* fields are then unused. Nil: the
	// model's own schedule, from the Probe* fields.
	Pace *pace.Config
}

// DefaultHold returns the hold of RESULTS.md's "holdfast defaults": down
// at the check the first failed attempt's sign makes, or at the
// database's break (DownAfter, 2, applies to the variants without Pace);
// probes at
// the engine's pace (pace.Engine: the check at the sign, then while
// requests wait 1.1 checks per connect the pool was asked for, between
// every 100 ms and every 2 s, ±20 %, and after the outage's first 10 s
// doubling to 3 s ±50 %);
// a wait of at most 30 s; a probe is the dial of a waiting connect when
// there is one. Its Probe* fields (from 250 ms, doubling, at most 3 s
// apart, ±50 %: the schedule the model had before it ran the engine's
// pace, and which RESULTS.md's figures described until then) apply only
// to a copy without Pace, the variants that read a schedule's trade-offs
// off (HoldVariants).
//
// The probe delays set the figures of the outage's ends, and pull against
// each other. The first seconds of an outage that every pod sees at once
// (the database's break) get a probe per pod as often as the pace allows:
// at a steady 100 ms, 5× what no retry makes at 2 requests/s, which is
// why the engine's pace follows the demand. The longest delay sets the end: a fleet
// whose probers wait that long apart finds the database back over about
// that, so the peak after recovery falls as it grows and the median pod
// comes back after about half of it.
func DefaultHold() Hold {
	return Hold{
		DownAfter:       2,
		BreakDown:       true,
		ProbeInitial:    250 * time.Millisecond,
		ProbeMultiplier: 2,
		ProbeMax:        3 * time.Second,
		ProbeJitter:     0.5,
		HoldFor:         30 * time.Second,
		ProbeWithHeld:   true,
		Pace:            &engine,
	}
}

var engine = pace.Engine()

func (h Hold) validate() error {
	if h.DownAfter < 1 || h.ProbeInitial <= 0 || h.ProbeMax < h.ProbeInitial || h.ProbeMultiplier < 1 ||
		h.ProbeJitter < 0 || h.ProbeJitter > 1 || h.HoldFor <= 0 {
		return fmt.Errorf("storm: invalid hold %+v", h)
	}
	return nil
}

// String describes h in a line, for the tables.
func (h Hold) String() string {
	down := fmt.Sprintf("down after %d failures", h.DownAfter)
	if h.Pace != nil && !h.NoSignCheck {
		down = "down at the check of a failure's sign"
	}
	if h.BreakDown {
		down += " or the break"
	}
	probe := "the prober's own connection"
	if h.ProbeWithHeld {
		probe = "a waiting connect's dial"
	}
	sched := fmt.Sprintf("%v ×%g to %v ±%.0f%%", h.ProbeInitial, h.ProbeMultiplier, h.ProbeMax, 100*h.ProbeJitter)
	if c := h.Pace; c != nil {
		switch {
		case c.Demand > 0:
			sched = fmt.Sprintf("following the demand (%.1f per connect asked for, a request waiting %v counted as asking, %v to %v ±%.0f%%, after %v to %v ±%.0f%%)",
				c.Demand, c.PerWaiting, pace.Fast, pace.Waited, 100*pace.Jitter, pace.FastFor, c.LateMost, 100*c.LateJitter)
		default:
			sched = fmt.Sprintf("at a steady pace (%v while requests wait for %v, then ×2 to %v, ±%.0f%%)", pace.Fast, pace.FastFor, c.LateMost, 100*pace.Jitter)
		}
		if c.IdleFrom != pace.Fast {
			sched = sched[:len(sched)-1] + fmt.Sprintf("; from %v while none waits)", c.IdleFrom)
		}
	}
	return fmt.Sprintf("%s; probes %s, by %s; wait at most %v", down, sched, probe, h.HoldFor)
}

// HoldVariants returns holdfast's defaults with one parameter of the hold
// changed at a time, so that a value the engine picks otherwise can be
// read off: the down count, the break, who probes, and the probe delays
// (the engine's steady pace before it followed the demand; the schedule the model had before,
// and its longest delay: the peak after recovery against the median pod).
func HoldVariants() []Strategy {
	with := func(name string, change func(*Hold)) Strategy {
		s := Named(Holdfast)
		h := *s.Hold
		change(&h)
		s.Name, s.Hold = name, &h
		return s
	}
	return []Strategy{
		with("hold: no check at a failure's sign, down after 2 failures (the engine before, for a token)", func(h *Hold) { h.NoSignCheck = true }),
		with("hold: no check at a failure's sign, down after 1 failure", func(h *Hold) { h.NoSignCheck, h.DownAfter = true, 1 }),
		with("hold: no check at a failure's sign, down after 3 failures", func(h *Hold) { h.NoSignCheck, h.DownAfter = true, 3 }),
		with("hold: the break does not count", func(h *Hold) { h.BreakDown = false }),
		with("hold: the prober's own connection", func(h *Hold) { h.ProbeWithHeld = false }),
		with("hold: a steady pace, every 100 ms while requests wait (pace.Steady, the engine's before)", func(h *Hold) { p := pace.Steady(); h.Pace = &p }),
		with("hold: probes from 250 ms ×2 to 3 s ±50 % (the model's schedule before)", func(h *Hold) { h.Pace = nil }),
		with("hold: probes from 100 ms ×2 to 3 s ±50 %", func(h *Hold) { h.Pace, h.ProbeInitial = nil, 100*time.Millisecond }),
		with("hold: probes from 250 ms ×2 to 1 s ±50 %", func(h *Hold) { h.Pace, h.ProbeMax = nil, time.Second }),
		with("hold: probes from 250 ms ×2 to 8 s ±50 %", func(h *Hold) { h.Pace, h.ProbeMax = nil, 8*time.Second }),
		with("hold: probes from 250 ms ×2 to 12 s ±50 %", func(h *Hold) { h.Pace, h.ProbeMax = nil, 12*time.Second }),
	}
}

// holdState is one pod's hold.
type holdState struct {
	fails   int           // failed connect attempts in a row, across the pool
	down    bool          // the pool is down
	since   int64         // when it went down
	delay   time.Duration // the prober's current delay, before jitter
	gen     uint32        // of the prober's schedule: a probe event of another is stale
	held    []int         // slots of the connects waiting for "back", in the order they began waiting
	probing bool          // a probe is in flight
	ownFail bool          // the prober's own probe in flight fails
	next    uint32        // ids of held connects, for stale wait timeouts
	downs   int           // times the pool went down

	// Pace.
	pacer    pace.Pacer
	asked    pace.Asked // requests that arrived while down; connects that began waiting
	sleeping bool       // a probe is scheduled (the prober sleeps)
	from     int64      // when its sleep began
	due      int64      // when it is due: a probe event at another time is stale
	u        float64    // its jitter draw
}

const (
	evRetry       = iota + 200 // a connect's retry comes due (strategies with a hold)
	evHoldTimeout              // a held connect's wait reached its bound
	evProbe                    // the prober's next probe
	evProbeEnd                 // the prober's own probe ends
)

// isDown reports whether pod's pool is down (never without a hold).
func (s *sim) isDown(pod int32) bool {
	h := s.pods[pod].hold
	return h != nil && h.down
}

// holdFailed counts a failed connect attempt of pod's pool; the pool goes
// down when it makes DownAfter in a row.
func (s *sim) holdFailed(pod int32, now int64) {
	h := s.pods[pod].hold
	h.fails++
	if h.down {
		return
	}
	if hc := s.c.Strategy.Hold; hc.Pace != nil && !hc.NoSignCheck {
		// The engine's prober checks at once at a sign (a failed dial or
		// handshake, a token the password function could not fetch:
		// suspect), the connect's retry waiting for its verdict, and
		// that check finds it down.
		s.count(pod, now, attemptProbe)
		s.goDown(pod, now)
		return
	}
	if h.fails >= s.c.Strategy.Hold.DownAfter {
		s.goDown(pod, now)
	}
}

// goDown puts pod's pool down at now and schedules the first probe.
func (s *sim) goDown(pod int32, now int64) {
	h := s.pods[pod].hold
	if h.down {
		return
	}
	h.down, h.since = true, now
	h.downs++
	h.gen++
	h.delay = s.c.Strategy.Hold.ProbeInitial
	if c := s.c.Strategy.Hold.Pace; c != nil {
		h.pacer.Config = *c
		h.pacer.Start(time.Duration(now), h.asked)
	}
	s.scheduleProbe(pod, now)
}

// paceWaiting is how many requests of pod wait at now, for its pace: the
// connects that wait (the probe's own among them), and the requests
// queued behind them for a pool slot, within their deadline (the
// engine's: connects or Acquires under way, whichever are more).
func (s *sim) paceWaiting(pod int32, now int64) int {
	p := &s.pods[pod]
	n := len(p.hold.held)
	for _, a := range p.queue {
		if now-a < int64(s.c.RequestTimeout) {
			n++
		}
	}
	return n
}

// demanded tells pod's prober that its pool was asked for a connect while
// down (an arrival, or a connect that began waiting): its sleep ends
// sooner when the pace is now shorter (with Pace: the engine's kick).
func (s *sim) demanded(pod int32, now int64) {
	h := s.pods[pod].hold
	if !h.sleeping {
		return
	}
	d := h.pacer.Jittered(h.pacer.Again(time.Duration(now), h.asked, s.paceWaiting(pod, now), true), h.u)
	if at := max(h.from+int64(d), now); at < h.due {
		h.due = at
		s.q.push(event{at: at, kind: evProbe, pod: pod, gen: h.gen})
	}
}

func (s *sim) scheduleProbe(pod int32, now int64) {
	h := s.pods[pod].hold
	hc := s.c.Strategy.Hold
	if hc.Pace != nil {
		h.u = s.rng.Float64()
		d := h.pacer.Jittered(h.pacer.Next(time.Duration(now), h.asked, s.paceWaiting(pod, now), true), h.u)
		h.sleeping, h.from, h.due = true, now, now+int64(d)
		s.q.push(event{at: h.due, kind: evProbe, pod: pod, gen: h.gen})
		return
	}
	d := jittered(h.delay, hc.ProbeJitter, s.rng.Float64())
	s.q.push(event{at: now + int64(d), kind: evProbe, pod: pod, gen: h.gen})
	h.delay = min(time.Duration(float64(h.delay)*hc.ProbeMultiplier), hc.ProbeMax)
}

// jittered spreads d uniformly over ±f of itself, u uniform in [0, 1):
// retry.Policy's formula.
func jittered(d time.Duration, f, u float64) time.Duration {
	if f == 0 {
		return d
	}
	lo, hi := float64(d)*(1-f), float64(d)*(1+f)
	return time.Duration(lo + u*(hi-lo+1))
}

// holdConnect makes the connect in slot wait for "back": it gives back
// its admission slot, and its request's deadline (and HoldFor) bounds the
// wait. A connect whose request's time is already up fails at once.
func (s *sim) holdConnect(pod int32, slot int, now int64) {
	p := &s.pods[pod]
	h := p.hold
	c := &p.slots[slot]
	if s.c.Strategy.Admission != nil {
		s.admitRelease(pod, slot, now)
	}
	deadline := min(c.owner+int64(s.c.RequestTimeout), now+int64(s.c.Strategy.Hold.HoldFor))
	if deadline <= now {
		s.endFailed(pod, slot, now)
		return
	}
	h.next++
	c.held, c.hid, c.hdeadline = true, h.next, deadline
	h.held = append(h.held, slot)
	s.q.push(event{at: deadline, kind: evHoldTimeout, pod: pod, slot: int8(slot), gen: c.hid})
	if s.c.Strategy.Hold.Pace != nil && h.down {
		h.asked.Waits++
		s.demanded(pod, now)
	}
}

// endFailed ends the connect in slot without a connection: its request
// fails, and the pool slot goes to the first request still waiting.
func (s *sim) endFailed(pod int32, slot int, now int64) {
	p := &s.pods[pod]
	c := &p.slots[slot]
	c.active, c.held = false, false
	p.busy--
	if c.owner >= 0 {
		s.failed(pod, min(now, c.owner+int64(s.c.RequestTimeout)))
	}
	s.nextWaiting(pod, now)
}

// unhold removes slot from the connects waiting for "back".
func (h *holdState) unhold(slot int) {
	if i := slices.Index(h.held, slot); i >= 0 {
		h.held = slices.Delete(h.held, i, i+1)
	}
}

// handleHold handles the hold's events; false for another kind.
func (s *sim) handleHold(e event) bool {
	switch e.kind {
	case evRetry:
		p := &s.pods[e.pod]
		if c := &p.slots[e.slot]; c.active && c.cid == e.gen {
			s.startAttempt(e.pod, int(e.slot), e.at, attemptRetry)
		}
	case evHoldTimeout:
		p := &s.pods[e.pod]
		c := &p.slots[e.slot]
		if !c.active || !c.held || c.hid != e.gen {
			return true
		}
		if c.probe {
			return true // its dial is the probe in flight: the probe's end decides
		}
		p.hold.unhold(int(e.slot))
		s.endFailed(e.pod, int(e.slot), e.at)
	case evProbe:
		if h := s.pods[e.pod].hold; s.c.Strategy.Hold.Pace != nil && (!h.sleeping || e.at != h.due) {
			return true // a sleep that a demand cut short, or ended
		}
		s.probe(e.pod, e.gen, e.at)
	case evProbeEnd:
		h := s.pods[e.pod].hold
		h.probing = false
		if e.gen != h.gen || !h.down {
			return true
		}
		s.probed(e.pod, !h.ownFail, e.at)
	default:
		return false
	}
	return true
}

// probe makes the prober's probe of generation gen at now: the dial of the
// oldest waiting connect (ProbeWithHeld), else one of its own.
func (s *sim) probe(pod int32, gen uint32, now int64) {
	p := &s.pods[pod]
	h := p.hold
	if gen != h.gen || !h.down || h.probing {
		return
	}
	h.probing, h.sleeping = true, false
	if s.c.Strategy.Hold.ProbeWithHeld {
		for _, slot := range h.held {
			if c := &p.slots[slot]; c.hdeadline > now {
				c.probe = true
				s.startAttempt(pod, slot, now, attemptProbe)
				return
			}
		}
	}
	s.count(pod, now, attemptProbe)
	h.ownFail = s.down(now)
	lat := s.c.ConnectLatency
	if h.ownFail {
		lat = s.c.FailLatency
	}
	s.q.push(event{at: now + int64(lat), kind: evProbeEnd, pod: pod, gen: h.gen})
}

// probeEnd ends the probe that was the dial of the waiting connect in
// slot: a connection for the pool and "back", or a failure after which
// the connect waits on (unless its wait ended meanwhile).
func (s *sim) probeEnd(pod int32, slot int, now int64) {
	p := &s.pods[pod]
	h := p.hold
	c := &p.slots[slot]
	c.probe = false
	h.probing = false
	if !c.fail {
		h.unhold(slot)
		c.held = false
		p.retrier.Budget.Success() // a completed handshake refills the budget
		s.connected(pod, slot, now)
		s.probed(pod, true, now)
		return
	}
	if c.hdeadline <= now {
		h.unhold(slot)
		s.endFailed(pod, slot, now)
	}
	s.probed(pod, false, now)
}

// probed takes a probe's result: the next probe after a failure, "back"
// after a success.
func (s *sim) probed(pod int32, ok bool, now int64) {
	h := s.pods[pod].hold
	if !ok {
		s.scheduleProbe(pod, now)
		return
	}
	h.down, h.fails, h.sleeping = false, 0, false
	h.gen++
	held := h.held
	h.held = nil
	for _, slot := range held {
		c := &s.pods[pod].slots[slot]
		c.held = false
		l, _ := s.pods[pod].retrier.Start(epoch.Add(time.Duration(now)), s.rng) // a fresh loop
		c.loop = l
		s.admitConstruct(pod, slot, now)
	}
}
