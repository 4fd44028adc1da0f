// Package pace is the outage prober's pace (internal/outage, "The
// prober"): when its next check is due. It is pure — time and the pool's
// demand are given to it — so that the engine's prober and the storm
// simulation's model of it (internal/storm, holdfast's defaults) run the
// same code and cannot drift apart.
//
// [Engine] is the engine's pace, which follows the demand (issue 30, item
// 5: polite by default): while requests wait, at most Demand checks per
// connect the pool was asked for over the last Window (a request still
// waiting counted as asking again every PerWaiting), never more often
// than every Fast nor less than every Waited; after FastFor doubling to
// LateMost; while nothing waits, doubling from a second.
//
// [Steady] is the engine's pace before (measured by the storm simulation
// as a variant): while requests wait, a check every Fast for the
// outage's first FastFor, whatever the demand, then doubling to Waited;
// while nothing waits, doubling from Fast to Idle; each ±Jitter.
package pace

import "time"

// The pace's values.
const (
	Fast    = 100 * time.Millisecond // the shortest, while requests wait
	FastFor = 10 * time.Second       // the outage's first, at the fast (or the demand's) pace; then doubling
	Waited  = 2 * time.Second        // the longest, while requests wait
	Idle    = 5 * time.Second        // the longest, while nothing waits
	Jitter  = 0.2                    // each pace is spread uniformly over ±Jitter of itself

	// Window is how far back a demand is counted; MinSpan the least span
	// it is divided by (at the first sign nothing was counted yet: the
	// first checks are paced as if for a second of demand, and a request
	// that starts waiting asks the pace again).
	Window  = 2 * time.Second
	MinSpan = time.Second
)

// Config is a pace's parameters.
type Config struct {
	// Demand, when positive, makes the pace while requests wait follow the
	// demand: Demand checks per connect asked for a second, at most every
	// Fast, at least every Waited. 0: every Fast for FastFor.
	Demand float64
	// PerWaiting, when positive (with Demand), counts each request that
	// waits as a connect asked for every PerWaiting, when that is more
	// than those counted (requests blocked, which ask for nothing new).
	PerWaiting time.Duration
	IdleFrom   time.Duration // the first pace while nothing waits (doubling to Idle)
	LateMost   time.Duration // the longest pace after FastFor while requests wait
	LateJitter float64       // the jitter after FastFor while requests wait
}

// Engine is the engine's pace, which follows the demand, as measured in
// the storm simulation: 1.1 checks per connect asked for (the sign's
// check at once and the demand's ramp fit within 1.3× no retry's peak at
// 2 requests/s), a request blocked for 2 s counted as asking again, from
// a second while nothing waits, and after FastFor doubling to 3 s ±50 %
// (the fleet finds the database back over seconds, not all at once).
func Engine() Config {
	return Config{Demand: 1.1, PerWaiting: 2 * time.Second, IdleFrom: time.Second, LateMost: 3 * time.Second, LateJitter: 0.5}
}

// Steady is the engine's pace before it followed the demand: every Fast
// while requests wait, whatever the demand, for FastFor, then doubling to
// Waited; while nothing waits, doubling from Fast to Idle; each ±Jitter.
// The storm simulation measures it as a variant.
func Steady() Config {
	return Config{IdleFrom: Fast, LateMost: Waited, LateJitter: Jitter}
}

// Of is the time between two checks, without jitter, for a prober that
// has made step checks since the first after the sign (0: the pace
// before the second), late of them after FastFor while requests waited;
// waiting: the requests (connects, or Acquires) that wait; down: the
// database is down (not suspect nor waking, where the verdict is due:
// Fast); downFor: since the first sign; asked: the connects the pool was
// asked for over the last span (about Window; Demand only).
func (c Config) Of(step, late, waiting int, down bool, downFor time.Duration, asked int, span time.Duration) time.Duration {
	if waiting == 0 {
		return min(c.IdleFrom<<min(step, 8), Idle)
	}
	if !down {
		return Fast
	}
	if c.Demand <= 0 {
		if downFor < FastFor {
			return Fast
		}
		return min(Fast<<min(step, 8), c.LateMost)
	}
	rate := float64(asked) / max(span, MinSpan).Seconds() // connects asked for a second
	if c.PerWaiting > 0 {
		rate = max(rate, float64(waiting)/c.PerWaiting.Seconds())
	}
	d := Waited
	if rate > 0 {
		d = time.Duration(float64(time.Second) / (c.Demand * rate))
		d = min(max(d, Fast), Waited)
	}
	if downFor >= FastFor {
		d = min(d<<min(late+1, 8), c.LateMost)
	}
	return d
}

// Jittered spreads d uniformly over ±f of itself, u uniform in [0, 1).
func Jittered(d time.Duration, f, u float64) time.Duration {
	return time.Duration(float64(d) * (1 - f + 2*f*u))
}

// Asked is what a pool was asked for, counted since any fixed moment
// (both counts only grow): Acquires that found the database not up, and
// connects that began waiting for it. Each counts a connect no retry
// would have dialed once; a pool's demand over a span is the larger of
// the two there (an Acquire makes at most one connect, but not every
// connect comes from an Acquire: pgxpool's MinConns). Only a pace with
// Demand reads it.
type Asked struct{ Acquires, Waits uint64 }

// Pacer is one prober's pace: its steps, and the demand it saw. The
// prober's alone (not safe for concurrent use). Times are offsets from
// any fixed origin (the engine's: the layer's creation; the model's: its
// virtual clock).
type Pacer struct {
	Config
	start      time.Duration // the first sign
	step, late int           // checks since the first; those after FastFor while requests waited
	cur, curL  int           // step and late of the sleep under way
	lateNow    bool          // the sleep under way is after FastFor, while requests wait
	samples    []sample      // the demand, sampled at each pace asked; the first at or before Window back
}

type sample struct {
	at    time.Duration
	asked Asked
}

// Start begins an outage's pace at now (the first sign, whose check is
// made at once).
func (p *Pacer) Start(now time.Duration, asked Asked) {
	p.start, p.step, p.late, p.cur, p.curL, p.lateNow = now, 0, 0, 0, 0, false
	p.samples = append(p.samples[:0], sample{now, asked})
}

// Next is the pace of the sleep that begins now, after a check: the
// next step's, without jitter.
func (p *Pacer) Next(now time.Duration, asked Asked, waiting int, down bool) time.Duration {
	p.cur, p.curL = p.step, p.late
	d := p.pace(now, asked, waiting, down)
	p.lateNow = waiting > 0 && down && now-p.start >= FastFor
	if p.lateNow {
		p.late++
	}
	p.step++
	return d
}

// Again is the pace of the sleep under way, asked afresh at now (a
// request began waiting), without jitter: the sleep ends sooner when it
// is shorter, never later.
func (p *Pacer) Again(now time.Duration, asked Asked, waiting int, down bool) time.Duration {
	return p.pace(now, asked, waiting, down)
}

// Jittered spreads d, a pace of the sleep under way, by its regime's
// jitter (u uniform in [0, 1)): ±Jitter; ±LateJitter after FastFor while
// requests wait.
func (p *Pacer) Jittered(d time.Duration, u float64) time.Duration {
	if p.lateNow {
		return Jittered(d, p.LateJitter, u)
	}
	return Jittered(d, Jitter, u)
}

// pace samples the demand at now (with Demand) and returns Of for the
// sleep under way: the connects asked for since the oldest sample within
// Window (or the last before it), over the time since that sample.
func (p *Pacer) pace(now time.Duration, asked Asked, waiting int, down bool) time.Duration {
	if p.Demand <= 0 {
		return p.Of(p.cur, p.curL, waiting, down, now-p.start, 0, 0)
	}
	for len(p.samples) > 1 && p.samples[1].at <= now-Window {
		p.samples = p.samples[1:]
	}
	if n := len(p.samples); n == 0 || p.samples[n-1].at < now {
		p.samples = append(p.samples, sample{now, asked})
	}
	base := p.samples[0]
	n := max(asked.Acquires-base.asked.Acquires, asked.Waits-base.asked.Waits)
	return p.Of(p.cur, p.curL, waiting, down, now-p.start, int(n), now-base.at)
}
