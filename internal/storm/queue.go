package storm

// event is something that happens to a pod (or, for evBreak and evMark,
// to the fleet) at a virtual time.
type event struct {
	at   int64  // virtual nanoseconds
	seq  uint64 // push order: events at the same time run in the order they were scheduled
	pod  int32
	gen  uint32 // evArrival: the pod's arrival generation
	slot int8   // evAttemptEnd: the construct
	kind uint8
}

// queue is a 4-ary min-heap of events by (at, seq), so that a run is
// deterministic.
type queue struct {
	h   []event
	seq uint64
}

func (q *queue) len() int { return len(q.h) }

func (e event) before(f event) bool { return e.at < f.at || e.at == f.at && e.seq < f.seq }

func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		parent := (i - 1) / 4
		if !q.h[i].before(q.h[parent]) {
			break
		}
		q.h[i], q.h[parent] = q.h[parent], q.h[i]
		i = parent
	}
}

func (q *queue) pop() event {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h = q.h[:last]
	i := 0
	for {
		m := i
		for c := 4*i + 1; c <= 4*i+4 && c < last; c++ {
			if q.h[c].before(q.h[m]) {
				m = c
			}
		}
		if m == i {
			return top
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
}
