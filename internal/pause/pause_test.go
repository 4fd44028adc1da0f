package pause

import (
	"context"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	closed := make(chan struct{})
	close(closed)
	for _, c := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		stop <-chan struct{}
		want bool
	}{
		{"elapsed", context.Background(), time.Millisecond, nil, true},
		{"zero", context.Background(), 0, nil, true},
		{"zero, ctx done", done, 0, nil, true},
		{"negative", done, -time.Second, closed, true},
		{"ctx done", done, time.Hour, nil, false},
		{"stop closed", context.Background(), time.Hour, closed, false},
	} {
		if got := For(c.ctx, c.d, c.stop); got != c.want {
			t.Errorf("%s: For = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestUntil(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	closed := make(chan struct{})
	close(closed)
	for _, c := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		wake <-chan struct{}
		want bool
	}{
		{"elapsed", context.Background(), time.Millisecond, nil, true},
		{"zero", done, 0, nil, true},
		{"woken", context.Background(), time.Hour, closed, true},
		{"canceled", done, time.Hour, nil, false},
	} {
		if got := Until(c.ctx, c.d, c.wake); got != c.want {
			t.Errorf("%s: Until %v, want %v", c.name, got, c.want)
		}
	}
	if Wake(context.Background()) != nil {
		t.Error("Wake of a context without one: not nil")
	}
	ch := make(chan struct{})
	if Wake(WithWake(context.Background(), func() <-chan struct{} { return ch })) != ch {
		t.Error("Wake does not return WithWake's channel")
	}
}
