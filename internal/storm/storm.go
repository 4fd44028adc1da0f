package storm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/enum"
	"github.com/holdfast-db/holdfast/retry"
)

// Dependency is what fails during the outage.
type Dependency int

const (
	// Database: the database refuses every connection during the outage,
	// and every open connection breaks when it starts.
	Database Dependency = iota + 1
	// TokenAPI: the token API (an IAM auth token per connect) refuses
	// every request during the outage; open connections live on until
	// their lifetime ends, and then cannot be replaced.
	TokenAPI
)

var dependencyNames = [...]string{Database: "database", TokenAPI: "token API"}

// String returns "database" or "token API".
func (d Dependency) String() string { return enum.Name("Dependency", d, dependencyNames[:]) }

// Strategy is how a pod's pool retries a failed connect: a retry.Policy and,
// when Budget is set, a retry.Budget of the pod's own (holdfast gives each
// Factory its own, and each pod has its own Factory).
type Strategy struct {
	Name   string
	Policy retry.Policy
	Budget *retry.BudgetConfig
	// Admission: holdfast's admission limit of new connections per pod
	// (admission.go); nil: none.
	Admission *Admission
	// Hold: the outage hold of each pod's pool (hold.go); nil: none.
	Hold *Hold
	// TokenRefund: each connect attempt fetches a token first, from a
	// token API that is up, and each fetched token refunds the budget, as
	// holdfast's factory did before it refunded only completed handshakes
	// (an IAM token function then voided the budget during a database
	// outage). Only with Dependency Database.
	TokenRefund bool
}

// The names of the strategies of [Strategies], for [Named].
const (
	NoRetry     = "no retry"
	Naive       = "naive 3× retry"
	BackoffOnly = "backoff only"
	// PlainBudget: holdfast's defaults before the hold, the default policy
	// and a per-pod retry.DefaultBudget (the plain token bucket), no
	// admission limit.
	PlainBudget = "plain budget (old defaults)"
	// Demand: the default policy and a per-pod retry.DemandBudget, the
	// budget relative to demand, alone.
	Demand = "holdfast, demand budget"
	// Holdfast: holdfast's defaults: the default policy, a per-pod
	// budget relative to demand ([FactoryBudget]), the outage hold
	// ([DefaultHold]) and the default admission limit (2 connects in
	// flight for a pool of 4).
	Holdfast = "holdfast defaults"
	// NoHold: holdfast's defaults without the outage hold, as the factory
	// is until the hold's engine lands: the default policy, a per-pod
	// FactoryBudget and the admission limit.
	NoHold = "holdfast defaults without the hold"
)

// FactoryBudget returns the retry budget of a holdfast factory built
// without WithRetryBudget (factory.go's defaultBudget; the root package's
// TestStormUsesTheDefaultBudget checks that they agree): relative to
// demand, as retry.DemandBudget, with a bucket of 40 tokens and a
// threshold of 20, so that a burst of failures gets 19 retries (a
// failover's first second) where DemandBudget's gets 2.
func FactoryBudget() retry.BudgetConfig {
	return retry.BudgetConfig{Capacity: 40, FailureCost: 1, Threshold: 20, SuccessRefill: 0.1, RefillPerSecond: 0.5}
}

// Strategies returns the strategies compared, in the order of the tables:
// no retry, three immediate tries, the default backoff without a budget,
// holdfast's old defaults (the plain budget), holdfast's policy with the
// budget relative to demand alone, holdfast's defaults (a budget relative
// to demand, the outage hold and the admission limit), and holdfast's
// defaults without the hold. A strategy added later goes at the end; find
// one with [Named].
func Strategies() []Strategy {
	none := retry.Default()
	none.MaxAttempts = 1
	naive := retry.Policy{MaxAttempts: 3, InitialInterval: time.Nanosecond, Multiplier: 1, MaxInterval: time.Nanosecond}
	budget, demand, factory := retry.DefaultBudget(), retry.DemandBudget(), FactoryBudget()
	hold := DefaultHold()
	return []Strategy{
		{Name: NoRetry, Policy: none},
		{Name: Naive, Policy: naive},
		{Name: BackoffOnly, Policy: retry.Default()},
		{Name: PlainBudget, Policy: retry.Default(), Budget: &budget},
		{Name: Demand, Policy: retry.Default(), Budget: &demand},
		{Name: Holdfast, Policy: retry.Default(), Budget: &factory, Hold: &hold, Admission: &Admission{InFlight: 2}},
		{Name: NoHold, Policy: retry.Default(), Budget: &factory, Admission: &Admission{InFlight: 2}},
	}
}

// Named returns the strategy of [Strategies] called name; it panics if
// there is none (a typo in a test or a command).
func Named(name string) Strategy {
	for _, s := range Strategies() {
		if s.Name == name {
			return s
		}
	}
	panic("storm: no strategy " + name)
}

// Config is one simulated run. [Default] gives the run of RESULTS.md.
type Config struct {
	Pods       int        // pods in the fleet, each with its own pool and Factory
	Seed       uint64     // seeds every random draw: a run is a function of its Config
	Dependency Dependency // what fails
	Strategy   Strategy

	OutageStart time.Duration // the dependency fails every request in [OutageStart, OutageStart+Outage)
	Outage      time.Duration
	After       time.Duration // how long the run goes on after the outage

	RequestRate    float64       // requests per second per pod (Poisson)
	RequestTimeout time.Duration // a request waiting this long for a connection fails

	MaxConns       int           // pool size (pgxpool's default on a small pod: 4)
	Lifetime       time.Duration // pgxpool MaxConnLifetime
	LifetimeJitter time.Duration // pgxpool MaxConnLifetimeJitter: a connection lives Lifetime + [0, LifetimeJitter)

	FailLatency    time.Duration // a refused attempt
	ConnectLatency time.Duration // a successful connect (token, TCP, TLS, startup)

	Bin time.Duration // resolution of the recorded load (a divisor of one second)
}

// Default returns the run of RESULTS.md for dependency d and strategy s:
// 10,000 pods, 10 requests per second each, a pool of 4 whose connections
// live 8 to 12 seconds (so that the fleet makes about one connect per pod
// every 10 seconds in steady state), an outage from 30 s to 60 s, 30 s
// after it; a refused attempt takes 5 ms, a connect 50 ms.
func Default(d Dependency, s Strategy) Config {
	return Config{
		Pods: 10000, Seed: 1, Dependency: d, Strategy: s,
		OutageStart: 30 * time.Second, Outage: 30 * time.Second, After: 30 * time.Second,
		RequestRate: 10, RequestTimeout: time.Second,
		MaxConns: 4, Lifetime: 8 * time.Second, LifetimeJitter: 4 * time.Second,
		FailLatency: 5 * time.Millisecond, ConnectLatency: 50 * time.Millisecond,
		Bin: 100 * time.Millisecond,
	}
}

// Result is what one run measured. Loads are requests reaching the
// failing dependency (connect attempts for the database, token requests
// for the token API), relative to the steady state before the outage.
type Result struct {
	Config Config

	// First, Retries and Probes count attempts per Bin, by start time:
	// first attempts of a connect, its retries, and the outage hold's
	// probes (hold.go).
	First, Retries, Probes []int

	Steady      float64       // attempts per second from 10 s to the outage
	PeakOutage  float64       // highest one-second load during the outage, ×Steady
	PeakAfter   float64       // highest one-second load from the end of the outage to the end of the run, ×Steady
	PeakAfterAt time.Duration // when that second starts, after the outage
	// Total is the load from the start of the outage to 10 s after its
	// end, ×(Steady × 40 s).
	Total float64
	// RetryShare is retries ÷ first attempts over the same window.
	// Probes are in neither: they have a bound of their own (one per pool
	// per backoff step), and are reported apart (ProbesPerPod).
	RetryShare float64
	// FirstPerPod, RetriesPerPod and ProbesPerPod are the attempts of the
	// same window per pod.
	FirstPerPod, RetriesPerPod, ProbesPerPod float64
	// Floor is the model's floor of ReconnectedMedian at a peak after
	// recovery of 3× steady: every pod needs at least one connect, and
	// 3×Steady connects a second reconnect half the pods in
	// Pods/2 ÷ (3×Steady) seconds.
	Floor time.Duration
	// ReconnectAttempts is the attempts a pod that had no connection when
	// the outage ended makes from then until a second after its first
	// connection (probes included), on average: with it, the floor of a
	// fleet whose pods make that many is ReconnectAttempts × Floor.
	ReconnectAttempts float64
	// WentDown is how many pods' pools the hold put down at least once.
	WentDown int
	// Recovery is the time from the end of the outage to the last request
	// it hurt: one that failed, or that waited for a connection longer than
	// a connect takes. Zero when no request after the outage was hurt.
	Recovery time.Duration

	// Reconnected is the time from the end of the outage until the last
	// pod that had no connection then has one again. Pods connect when a
	// request needs one, so this includes waiting for a request.
	Reconnected time.Duration

	Requests, Failed int // requests in the run, and those that failed
	Disconnected     int // pods that had no connection when the outage ended

	// ReconnectedMedian is Reconnected for the median pod: the time from
	// the end of the outage until that pod has a connection again (0 for
	// a pod that never lost its connections). HurtMedian is Recovery for
	// the median pod: until the last request of that pod that failed or
	// waited longer than a connect takes.
	ReconnectedMedian, HurtMedian time.Duration
	Refused                       int // connects the admission limit refused (their wait ended)
}

// Load returns the attempts of bin i: first attempts, retries and probes.
func (r *Result) Load(i int) int { return r.First[i] + r.Retries[i] + r.Probes[i] }

// errOutage is the failure of every attempt during the outage; the
// simulated pools classify it as transient, as holdfast classifies a
// refused connection or a token API's 503.
var errOutage = errors.New("storm: dependency down")

func classifyOutage(error) classify.Verdict {
	return classify.Verdict{Class: classify.Transient, Reason: "outage"}
}

// epoch is virtual time zero.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Run simulates c. It is deterministic: the same Config gives the same
// Result. It runs on the calling goroutine and never sleeps.
func Run(c Config) (*Result, error) {
	if c.Pods <= 0 || c.MaxConns <= 0 || c.RequestRate <= 0 || c.Bin <= 0 || time.Second%c.Bin != 0 {
		return nil, fmt.Errorf("storm: invalid config: %d pods, %d max conns, rate %v, bin %v", c.Pods, c.MaxConns, c.RequestRate, c.Bin)
	}
	if c.OutageStart < 11*time.Second || c.After < 10*time.Second {
		return nil, errors.New("storm: the outage must start after 11 s and the run go on 10 s after it")
	}
	if h := c.Strategy.Hold; h != nil {
		if err := h.validate(); err != nil {
			return nil, err
		}
	}
	s := &sim{
		c:    c,
		rng:  rand.New(rand.NewPCG(c.Seed, c.Seed^0x5eed)),
		t0:   int64(c.OutageStart),
		t1:   int64(c.OutageStart + c.Outage),
		end:  int64(c.OutageStart + c.Outage + c.After),
		pods: make([]pod, c.Pods),
	}
	s.lastHurt = s.t1
	s.podHurt = make([]int64, c.Pods)
	s.podBack = make([]int64, c.Pods)
	s.reconn = make([]int32, c.Pods)
	bins := int(s.end/int64(c.Bin)) + 1
	s.res = &Result{Config: c, First: make([]int, bins), Retries: make([]int, bins), Probes: make([]int, bins)}
	for i := range s.pods {
		p := &s.pods[i]
		p.retrier = retry.Retrier{Policy: c.Strategy.Policy, Classify: classifyOutage}
		if c.Strategy.Budget != nil {
			b, err := retry.NewBudget(*c.Strategy.Budget)
			if err != nil {
				return nil, err
			}
			p.retrier.Budget = b
		}
		if _, err := p.retrier.Start(epoch, nil); err != nil {
			return nil, err // an invalid policy
		}
		p.slots = make([]construct, c.MaxConns)
		if c.Strategy.Hold != nil {
			p.hold = &holdState{}
		}
		// Steady state from the start: one connection, part-way through
		// its life. The life of the connection found open at a random
		// moment is length-biased (density ∝ l over [Lifetime,
		// Lifetime+LifetimeJitter)), and the moment uniform within it.
		lo, hi := float64(c.Lifetime), float64(c.Lifetime+c.LifetimeJitter)
		life := math.Sqrt(lo*lo + s.rng.Float64()*(hi*hi-lo*lo))
		s.addConn(int32(i), 0, s.rng.Float64()*life)
	}
	if c.Dependency == Database {
		s.q.push(event{at: s.t0, kind: evBreak})
	}
	s.q.push(event{at: s.t1, kind: evMark})
	for s.q.len() > 0 {
		e := s.q.pop()
		if e.at >= s.end {
			break
		}
		s.handle(e)
	}
	s.finish()
	return s.res, nil
}

type sim struct {
	c        Config
	rng      *rand.Rand
	q        queue
	pods     []pod
	t0, t1   int64 // the outage, in virtual nanoseconds
	end      int64
	lastHurt int64   // the last request hurt at or after t1
	podHurt  []int64 // the same, per pod
	podBack  []int64 // when each pod that had no connection at t1 has one again
	reconn   []int32 // attempts of each such pod from t1 to a second after podBack
	res      *Result
}

// pod is one pod's pool. Requests are served at once by any open
// connection; they are simulated one by one only while the pool has none
// (arrivals are Poisson, so the next one is drawn afresh whenever the pool
// runs out).
type pod struct {
	retrier retry.Retrier
	conns   []int64 // expiry times of the open connections
	gen     uint32  // arrival generation: an arrival of another one is stale
	slots   []construct
	busy    int     // active constructs
	queue   []int64 // arrival times of requests waiting for a connection slot
	lost    bool    // had no connection when the outage ended, and none since
	adm     *admission
	hold    *holdState // the outage hold (hold.go); nil without one
	nextCID uint32     // ids of constructs, for stale retry events
}

// construct is one connection being built, as pgxpool builds it for the
// Acquire that found the pool empty: holdfast's connect layer runs a retry
// loop inside it.
type construct struct {
	active bool
	loop   retry.Loop
	owner  int64 // arrival time of the request that started it, or -1
	fail   bool  // the attempt in flight fails

	id       uint32 // admission: the construct's id, for stale events
	deadline int64  // admission: when its wait for a slot ends
	holds    bool   // admission: it holds a slot

	cid       uint32 // the construct's id, for stale retry events (hold)
	held      bool   // hold: it waits for the prober's "back"
	hid       uint32 // hold: the id of its wait, for stale timeouts
	hdeadline int64  // hold: when its wait ends
	probe     bool   // hold: its attempt in flight is the prober's probe
}

// The kinds of attempt, for the counts per bin.
const (
	attemptFirst = iota
	attemptRetry
	attemptProbe
)

const (
	evArrival = iota + 1
	evAttemptEnd
	evExpire
	evBreak
	evMark
)

func (s *sim) down(t int64) bool { return t >= s.t0 && t < s.t1 }

func (s *sim) handle(e event) {
	if s.handleAdmission(e) || s.handleHold(e) {
		return
	}
	switch e.kind {
	case evArrival:
		p := &s.pods[e.pod]
		if e.gen != p.gen || len(p.conns) > 0 {
			return
		}
		s.res.Requests++
		counted := false
		if h := p.hold; h != nil && h.down && s.c.Strategy.Hold.Pace != nil {
			h.asked.Acquires++ // an Acquire that found the pool down
			counted = true
		}
		if p.busy < len(p.slots) {
			s.startConstruct(e.pod, e.at, e.at)
		} else {
			p.queue = append(p.queue, e.at)
		}
		if counted && p.hold.down {
			s.demanded(e.pod, e.at) // the engine's prober is told at the Acquire's start
		}
		s.scheduleArrival(e.pod, e.at)
	case evAttemptEnd:
		s.attemptEnd(e.pod, int(e.slot), e.at)
	case evExpire:
		p := &s.pods[e.pod]
		for i, x := range p.conns {
			if x == e.at {
				p.conns = append(p.conns[:i], p.conns[i+1:]...)
				if len(p.conns) == 0 {
					s.runOut(e.pod, e.at)
				}
				return
			}
		}
	case evBreak:
		for i := range s.pods {
			if p := &s.pods[i]; len(p.conns) > 0 {
				p.conns = p.conns[:0]
				if p.hold != nil && s.c.Strategy.Hold.BreakDown {
					if s.c.Strategy.Hold.Pace != nil && !p.hold.down {
						// The engine's prober checks at once at a sign
						// (suspect), and that check finds it down.
						s.count(int32(i), e.at, attemptProbe)
					}
					s.goDown(int32(i), e.at) // 57P01 on the pool's connections
				}
				s.runOut(int32(i), e.at)
			}
		}
	case evMark:
		for i := range s.pods {
			if p := &s.pods[i]; len(p.conns) == 0 {
				p.lost = true
				s.res.Disconnected++
			}
		}
	}
}

// runOut starts the arrivals of a pod that has no connection left.
func (s *sim) runOut(pod int32, now int64) {
	s.pods[pod].gen++
	s.scheduleArrival(pod, now)
}

func (s *sim) scheduleArrival(pod int32, now int64) {
	gap := s.rng.ExpFloat64() / s.c.RequestRate * float64(time.Second)
	s.q.push(event{at: now + int64(gap), kind: evArrival, pod: pod, gen: s.pods[pod].gen})
}

// addConn opens a connection at now that lives life nanoseconds.
func (s *sim) addConn(pod int32, now int64, life float64) {
	p := &s.pods[pod]
	if len(p.conns) == 0 {
		p.gen++ // arrivals stop: requests are served at once
	}
	if p.lost {
		p.lost = false
		s.res.Reconnected = max(s.res.Reconnected, time.Duration(now-s.t1))
		s.podBack[pod] = now
	}
	exp := now + int64(life)
	p.conns = append(p.conns, exp)
	s.q.push(event{at: exp, kind: evExpire, pod: pod})
}

func (s *sim) startConstruct(pod int32, owner, now int64) {
	p := &s.pods[pod]
	for i := range p.slots {
		if c := &p.slots[i]; !c.active {
			l, _ := p.retrier.Start(epoch.Add(time.Duration(now)), s.rng) // the policy was validated in Run
			p.nextCID++
			*c = construct{active: true, loop: l, owner: owner, cid: p.nextCID}
			p.busy++
			s.admitConstruct(pod, i, now)
			return
		}
	}
}

// startAttempt records an attempt of kind that reaches the dependency at t
// and schedules its end. With a hold, a first attempt or a retry of a pool
// that is down waits for "back" instead (hold.go).
func (s *sim) startAttempt(pod int32, slot int, t int64, kind int) {
	if kind != attemptProbe && s.isDown(pod) {
		s.holdConnect(pod, slot, t)
		return
	}
	c := &s.pods[pod].slots[slot]
	s.count(pod, t, kind)
	c.fail = s.down(t)
	if s.c.Strategy.TokenRefund && s.c.Dependency == Database {
		s.pods[pod].retrier.Budget.Success() // the token came back: refunded, before
	}
	lat := s.c.ConnectLatency
	if c.fail {
		lat = s.c.FailLatency
	}
	s.q.push(event{at: t + int64(lat), kind: evAttemptEnd, pod: pod, slot: int8(slot)})
}

// count records an attempt of kind of pod that starts at t.
func (s *sim) count(pod int32, t int64, kind int) {
	if t >= s.t1 && (s.pods[pod].lost || s.podBack[pod] > 0 && t < s.podBack[pod]+int64(time.Second)) {
		s.reconn[pod]++
	}
	b := t / int64(s.c.Bin)
	if b >= int64(len(s.res.First)) {
		return
	}
	switch kind {
	case attemptFirst:
		s.res.First[b]++
	case attemptRetry:
		s.res.Retries[b]++
	default:
		s.res.Probes[b]++
	}
}

func (s *sim) attemptEnd(pod int32, slot int, now int64) {
	p := &s.pods[pod]
	c := &p.slots[slot]
	if c.probe {
		s.probeEnd(pod, slot, now)
		return
	}
	var err error
	if c.fail {
		err = errOutage
	}
	delay, again := c.loop.Next(context.Background(), epoch.Add(time.Duration(now)), err)
	if h := p.hold; h != nil {
		if err == nil {
			h.fails = 0
		} else {
			s.holdFailed(pod, now)
		}
		if err != nil && h.down {
			s.holdConnect(pod, slot, now) // no retry of its own: it waits for "back"
			return
		}
		if again {
			s.q.push(event{at: now + int64(delay), kind: evRetry, pod: pod, slot: int8(slot), gen: c.cid})
			return
		}
	} else if again {
		s.startAttempt(pod, slot, now+int64(delay), attemptRetry)
		return
	}
	if err == nil {
		s.connected(pod, slot, now)
		return
	}
	c.active = false
	p.busy--
	if s.c.Strategy.Admission != nil {
		s.admitRelease(pod, slot, now)
	}
	if c.owner >= 0 {
		s.failed(pod, min(now, c.owner+int64(s.c.RequestTimeout)))
	}
	s.nextWaiting(pod, now)
}

// connected ends the connect in slot with a connection: its request and
// those waiting for a pool slot are served.
func (s *sim) connected(pod int32, slot int, now int64) {
	p := &s.pods[pod]
	c := &p.slots[slot]
	c.active = false
	p.busy--
	if s.c.Strategy.Admission != nil {
		s.admitRelease(pod, slot, now)
	}
	s.addConn(pod, now, float64(s.c.Lifetime)+s.rng.Float64()*float64(s.c.LifetimeJitter))
	if c.owner >= 0 {
		s.served(pod, c.owner, now)
	}
	for _, a := range p.queue {
		s.served(pod, a, now)
	}
	p.queue = p.queue[:0]
}

// nextWaiting gives a free pool slot of pod to the first request still
// waiting, as a waiting pgxpool Acquire takes it; those that waited past
// RequestTimeout fail on the way.
func (s *sim) nextWaiting(pod int32, now int64) {
	p := &s.pods[pod]
	for len(p.queue) > 0 {
		a := p.queue[0]
		p.queue = p.queue[1:]
		if now-a >= int64(s.c.RequestTimeout) {
			s.failed(pod, a+int64(s.c.RequestTimeout))
			continue
		}
		s.startConstruct(pod, a, now)
		break
	}
}

// served records a request that arrived at a and got a connection at now.
func (s *sim) served(pod int32, a, now int64) {
	if now-a >= int64(s.c.RequestTimeout) {
		s.failed(pod, a+int64(s.c.RequestTimeout))
		return
	}
	if now-a > int64(s.c.ConnectLatency) {
		s.hurt(pod, now)
	}
}

func (s *sim) failed(pod int32, at int64) {
	s.res.Failed++
	s.hurt(pod, at)
}

func (s *sim) hurt(pod int32, at int64) {
	if at >= s.t1 && at > s.lastHurt {
		s.lastHurt = at
	}
	if at >= s.t1 && at > s.podHurt[pod] {
		s.podHurt[pod] = at
	}
}

// finish fails the requests still waiting past their timeout and computes
// the figures.
func (s *sim) finish() {
	for i := range s.pods {
		if s.pods[i].lost {
			s.res.Reconnected = time.Duration(s.end - s.t1) // never, within the run
			s.podBack[i] = s.end
		}
		for _, a := range s.pods[i].queue {
			if a+int64(s.c.RequestTimeout) <= s.end {
				s.failed(int32(i), a+int64(s.c.RequestTimeout))
			}
		}
	}
	r := s.res
	per := int(time.Second / s.c.Bin) // bins per second
	second := func(t int64) int {     // the load of the second starting at t
		n, b := 0, int(t/int64(s.c.Bin))
		for i := b; i < b+per && i < len(r.First); i++ {
			n += r.Load(i)
		}
		return n
	}
	sum := func(from, to int64) (first, retries, probes int) {
		for i := int(from / int64(s.c.Bin)); i < int(to/int64(s.c.Bin)); i++ {
			first += r.First[i]
			retries += r.Retries[i]
			probes += r.Probes[i]
		}
		return first, retries, probes
	}
	sec := int64(time.Second)
	f, rt, pr := sum(10*sec, s.t0)
	r.Steady = float64(f+rt+pr) / (float64(s.t0-10*sec) / float64(sec))
	peak := func(from, to int64) (float64, int64) {
		best, at := 0, from
		for t := from; t+sec <= to; t += sec {
			if n := second(t); n > best {
				best, at = n, t
			}
		}
		return float64(best) / r.Steady, at
	}
	r.PeakOutage, _ = peak(s.t0, s.t1)
	var at int64
	r.PeakAfter, at = peak(s.t1, s.end)
	r.PeakAfterAt = time.Duration(at - s.t1)
	f, rt, pr = sum(s.t0, s.t1+10*sec)
	r.Total = float64(f+rt+pr) / (r.Steady * float64(s.t1+10*sec-s.t0) / float64(sec))
	r.RetryShare = float64(rt) / math.Max(float64(f), 1)
	n := float64(len(s.pods))
	r.FirstPerPod, r.RetriesPerPod, r.ProbesPerPod = float64(f)/n, float64(rt)/n, float64(pr)/n
	r.Floor = time.Duration(n / 2 / (3 * r.Steady) * float64(time.Second))
	if r.Disconnected > 0 {
		total := 0
		for _, a := range s.reconn {
			total += int(a)
		}
		r.ReconnectAttempts = float64(total) / float64(r.Disconnected)
	}
	for i := range s.pods {
		if h := s.pods[i].hold; h != nil && h.downs > 0 {
			r.WentDown++
		}
	}
	r.Recovery = time.Duration(s.lastHurt - s.t1)
	r.ReconnectedMedian, r.HurtMedian = median(s.podBack, s.t1), median(s.podHurt, s.t1)
}
