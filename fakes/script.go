package fakes

import (
	"sync"
	"sync/atomic"
)

// script is the queue of steps shared by Connector and PasswordSource, with
// exact counters. Its zero value is an empty script. It must not be copied.
type script struct {
	mu    sync.Mutex
	steps []Step // remaining steps; steps[0].times counts the plays left when timesSet

	attempts  atomic.Int64
	successes atomic.Int64
	failures  atomic.Int64
}

// next counts an attempt and pops the step it plays: the head of the script,
// or Connect() once the script is used up. Picking and counting happen under
// one lock, so concurrent callers each get a distinct play.
func (s *script) next() Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts.Add(1)
	for len(s.steps) > 0 {
		head := &s.steps[0]
		if head.forever {
			return *head
		}
		left := head.plays()
		if left <= 0 {
			s.steps[0] = Step{} // drop references (errors) held by the step
			s.steps = s.steps[1:]
			continue
		}
		st := *head
		head.timesSet, head.times = true, left-1
		if left == 1 {
			s.steps[0] = Step{}
			s.steps = s.steps[1:]
		}
		return st
	}
	return Connect()
}

// add appends steps to the script.
func (s *script) add(steps []Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// set replaces the remaining script with a copy of steps.
func (s *script) set(steps []Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append([]Step(nil), steps...)
}

// done records the outcome of a play.
func (s *script) done(err error) {
	if err != nil {
		s.failures.Add(1)
	} else {
		s.successes.Add(1)
	}
}
