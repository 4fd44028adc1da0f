package storm

import (
	"slices"
	"time"

	"github.com/holdfast-db/holdfast/internal/admit"
)

// Admission is holdfast's admission limit of new connections
// (holdfast.WithConnectLimit) on each pod's pool: at most InFlight
// connects in flight (from the first attempt to the end of the connect,
// retries included), and, when PerSecond > 0, at most PerSecond new
// connects per second with bursts of Burst (the real token bucket of
// internal/admit, on the virtual clock). A connect that finds no slot
// waits, FIFO, until a slot is free, its request's deadline passes (the
// caller's deadline, which Factory.Acquire passes down) or the policy's
// MaxElapsed; one that waited in vain fails without an attempt.
type Admission struct {
	InFlight  int
	PerSecond float64
	Burst     int
}

// AdmissionStrategies returns the plain budget (holdfast's old defaults)
// and the demand budget, without the hold, with admission limits: the
// default of a pool of 4 (2 connects in flight, which pgxpool's own limit
// of MaxConns constructs hardly changes), one connect in flight per pod,
// and one in flight with a rate per pod.
func AdmissionStrategies() []Strategy {
	with := func(name string, a Admission) Strategy {
		s := Named(PlainBudget)
		s.Name, s.Admission = name, &a
		return s
	}
	withDemand := func(name string, a Admission) Strategy {
		s := Named(Demand)
		s.Name, s.Admission = name, &a
		return s
	}
	return []Strategy{
		with("plain budget + admission 2 in flight (default)", Admission{InFlight: 2}),
		with("plain budget + admission 1 in flight", Admission{InFlight: 1}),
		with("plain budget + admission 1 in flight, 1/s burst 2", Admission{InFlight: 1, PerSecond: 1, Burst: 2}),
		with("plain budget + admission 1 in flight, 0.5/s burst 2", Admission{InFlight: 1, PerSecond: 0.5, Burst: 2}),
		with("plain budget + admission 1 in flight, 0.25/s burst 2", Admission{InFlight: 1, PerSecond: 0.25, Burst: 2}),
		withDemand("demand budget + admission 2 in flight", Admission{InFlight: 2}),
		withDemand("demand budget + admission 1 in flight, 0.5/s burst 2", Admission{InFlight: 1, PerSecond: 0.5, Burst: 2}),
	}
}

// admission is one pod's admission state.
type admission struct {
	inFlight int
	waiting  []int // slots of the constructs waiting for admission, FIFO
	bucket   *admit.Bucket
	next     uint32 // ids of constructs, for stale timeouts
}

const (
	evAdmitted     = iota + 100 // a construct's rate token came: its first attempt starts
	evQueueTimeout              // a queued construct's wait reached its bound
)

// admitConstruct starts the first attempt of the construct in slot, or
// queues it behind the pod's admission limit.
func (s *sim) admitConstruct(pod int32, slot int, now int64) {
	if s.isDown(pod) {
		s.holdConnect(pod, slot, now) // it waits for "back" before admission
		return
	}
	a := s.c.Strategy.Admission
	if a == nil {
		s.startAttempt(pod, slot, now, attemptFirst)
		return
	}
	p := &s.pods[pod]
	if p.adm == nil {
		p.adm = &admission{}
		if a.PerSecond > 0 {
			p.adm.bucket = admit.NewBucket(a.PerSecond, a.Burst)
		}
	}
	c := &p.slots[slot]
	p.adm.next++
	c.id = p.adm.next
	c.deadline = c.owner + int64(s.c.RequestTimeout)
	if me := s.c.Strategy.Policy.MaxElapsed; me > 0 {
		c.deadline = min(c.deadline, now+int64(me))
	}
	if p.adm.inFlight < max(a.InFlight, 1) && len(p.adm.waiting) == 0 {
		s.admitted(pod, slot, now)
		return
	}
	p.adm.waiting = append(p.adm.waiting, slot)
	s.q.push(event{at: c.deadline, kind: evQueueTimeout, pod: pod, slot: int8(slot), gen: c.id})
}

// admitted gives the construct in slot its admission slot, then its rate
// token, and starts its first attempt (or fails it when the token would
// come after its deadline).
func (s *sim) admitted(pod int32, slot int, now int64) {
	p := &s.pods[pod]
	c := &p.slots[slot]
	p.adm.inFlight++
	c.holds = true
	if p.adm.bucket == nil {
		s.startAttempt(pod, slot, now, attemptFirst)
		return
	}
	wait, ok := p.adm.bucket.ReserveJittered(now+1, c.deadline+1, s.rng.Float64()) // the bucket's clock never reads 0
	if !ok {
		s.refuseConstruct(pod, slot, now)
		return
	}
	if wait == 0 {
		s.startAttempt(pod, slot, now, attemptFirst)
		return
	}
	s.q.push(event{at: now + int64(wait), kind: evAdmitted, pod: pod, slot: int8(slot), gen: c.id})
}

// admitRelease frees the admission slot of the construct in slot, which
// ended, and admits the first construct still waiting.
func (s *sim) admitRelease(pod int32, slot int, now int64) {
	p := &s.pods[pod]
	if c := &p.slots[slot]; !c.holds {
		return
	} else {
		c.holds = false
	}
	p.adm.inFlight--
	// A refusal below may start another construct, which may take the
	// slot: check the limit each time.
	for p.adm.inFlight < max(s.c.Strategy.Admission.InFlight, 1) && len(p.adm.waiting) > 0 {
		slot := p.adm.waiting[0]
		p.adm.waiting = p.adm.waiting[1:]
		if p.slots[slot].deadline <= now {
			s.refuseConstruct(pod, slot, now)
			continue
		}
		s.admitted(pod, slot, now)
	}
}

// handleAdmission handles the admission's events; false for another kind.
func (s *sim) handleAdmission(e event) bool {
	switch e.kind {
	case evAdmitted:
		p := &s.pods[e.pod]
		if c := &p.slots[e.slot]; c.active && c.id == e.gen {
			s.startAttempt(e.pod, int(e.slot), e.at, attemptFirst)
		}
	case evQueueTimeout:
		p := &s.pods[e.pod]
		c := &p.slots[e.slot]
		if !c.active || c.id != e.gen {
			return true
		}
		if i := slices.Index(p.adm.waiting, int(e.slot)); i >= 0 {
			p.adm.waiting = slices.Delete(p.adm.waiting, i, i+1)
			s.refuseConstruct(e.pod, int(e.slot), e.at)
		}
	default:
		return false
	}
	return true
}

// refuseConstruct ends the construct in slot without an attempt: its wait
// for admission ended (a *holdfast.QueuedError). Its request fails, and
// the pool slot goes to the first request still waiting, as after a
// failed connect. A construct refused after its admission slot (no rate
// token in time) gives the slot back.
func (s *sim) refuseConstruct(pod int32, slot int, now int64) {
	p := &s.pods[pod]
	c := &p.slots[slot]
	c.active = false
	p.busy--
	s.res.Refused++
	if c.owner >= 0 {
		s.failed(pod, min(now, c.owner+int64(s.c.RequestTimeout)))
	}
	s.admitRelease(pod, slot, now)
	s.nextWaiting(pod, now)
}

// median returns the median of the times ts after t1, each at least 0
// (a pod that needs no recovery).
func median(ts []int64, t1 int64) time.Duration {
	d := make([]int64, len(ts))
	for i, h := range ts {
		d[i] = max(h-t1, 0)
	}
	slices.Sort(d)
	return time.Duration(d[len(d)/2])
}
