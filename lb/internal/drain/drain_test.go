package drain_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/lb/internal/drain"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func held(n int64) drain.Probe {
	return func(context.Context) (drain.Usage, error) {
		return drain.Usage{{What: "acquired connection", N: n}, {What: "in-flight request", N: 0}}, nil
	}
}

// The bound is real: a short one passes with the work still held, and the
// error names it.
func TestWaitTimesOutNamingWhatIsInUse(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := drain.Wait(context.Background(), drain.Config{Interval: 10 * time.Millisecond, Timeout: 200 * time.Millisecond}, held(1))
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Errorf("Wait returned after %v, before its 200ms bound", elapsed)
	}
	if !errors.Is(err, drain.ErrTimeout) {
		t.Fatalf("Wait = %v, want ErrTimeout", err)
	}
	want := "drain: timed out after 200ms: still in use: 1 acquired connection"
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	var te *drain.TimeoutError
	if !errors.As(err, &te) || te.Polls < 2 {
		t.Errorf("error = %#v, want a *TimeoutError after several polls", err)
	}
}

// The probe is polled until it reads zero, with no sleeps in the test: the
// probe itself decides when the work is gone.
func TestWaitReturnsWhenWorkIsGone(t *testing.T) {
	t.Parallel()
	n := int64(3)
	probe := func(context.Context) (drain.Usage, error) {
		u := drain.Usage{{What: "in-flight request", N: n}}
		n--
		return u, nil
	}
	res, err := drain.Wait(context.Background(), drain.Config{Interval: time.Millisecond, Timeout: time.Minute}, probe)
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if res.Polls != 4 {
		t.Errorf("Polls = %d, want 4 (3, 2, 1, 0)", res.Polls)
	}
	if res.Elapsed < 3*time.Millisecond {
		t.Errorf("Elapsed = %v, want at least 3 intervals of 1ms", res.Elapsed)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	t.Parallel()
	t.Run("canceled while waiting", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		polled := make(chan struct{})
		probe := func(context.Context) (drain.Usage, error) {
			select {
			case polled <- struct{}{}:
			default:
			}
			return drain.Usage{{What: "acquired connection", N: 2}}, nil
		}
		done := make(chan error, 1)
		go func() {
			_, err := drain.Wait(ctx, drain.Config{Interval: time.Hour, Timeout: 2 * time.Hour}, probe)
			done <- err
		}()
		<-polled // the first poll happened; Wait now sleeps for an hour
		cancel()
		err := <-done
		if !errors.Is(err, drain.ErrTimeout) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want ErrTimeout and context.Canceled", err)
		}
		if !strings.Contains(err.Error(), "context canceled") || !strings.Contains(err.Error(), "2 acquired connections") {
			t.Errorf("error = %q, want the cause and what was in use", err)
		}
	})
	t.Run("already canceled: no poll", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("deploy aborted")
		cancel(stop)
		polls := 0
		_, err := drain.Wait(ctx, drain.Config{}, func(context.Context) (drain.Usage, error) { polls++; return nil, nil })
		if !errors.Is(err, stop) || polls != 0 {
			t.Fatalf("Wait = %v after %d polls, want the cause and no poll", err, polls)
		}
		if !strings.Contains(err.Error(), "not polled") {
			t.Errorf("error = %q, want it to say nothing was polled", err)
		}
	})
}

func TestWaitProbeError(t *testing.T) {
	t.Parallel()
	boom := errors.New("lb api: 503")
	calls := 0
	probe := func(context.Context) (drain.Usage, error) {
		calls++
		if calls == 2 {
			return nil, boom
		}
		return drain.Usage{{What: "current connection", N: 5}}, nil
	}
	_, err := drain.Wait(context.Background(), drain.Config{Interval: time.Millisecond}, probe)
	var pe *drain.ProbeError
	if !errors.As(err, &pe) || !errors.Is(err, boom) || pe.Polls != 2 || calls != 2 {
		t.Fatalf("Wait = %v after %d calls, want a *ProbeError wrapping the probe's error on poll 2", err, calls)
	}
	if errors.Is(err, drain.ErrTimeout) {
		t.Errorf("a probe failure must not match ErrTimeout")
	}
}

func TestWaitInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   drain.Config
		probe drain.Probe
		want  string
	}{
		{"negative interval", drain.Config{Interval: -time.Second}, held(0), "drain: invalid Interval: must not be negative (got -1s)"},
		{"negative timeout", drain.Config{Timeout: -1}, held(0), "drain: invalid Timeout: must not be negative (got -1ns)"},
		{"nil probe", drain.Config{}, nil, "drain: invalid Probe: must not be nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := drain.Wait(context.Background(), tt.cfg, tt.probe)
			if !errors.Is(err, drain.ErrInvalidConfig) || err.Error() != tt.want {
				t.Fatalf("Wait = %v, want %q matching ErrInvalidConfig", err, tt.want)
			}
		})
	}
}

func TestUsageString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		u    drain.Usage
		want string
		zero bool
	}{
		{"nil", nil, "nothing in use", true},
		{"all zero", drain.Usage{{"acquired connection", 0}, {"in-flight request", 0}}, "nothing in use", true},
		{"one", drain.Usage{{"acquired connection", 1}, {"in-flight request", 0}}, "1 acquired connection", false},
		{"plural and both", drain.Usage{{"acquired connection", 2}, {"in-flight request", 1}}, "2 acquired connections, 1 in-flight request", false},
		{"negative counts as zero", drain.Usage{{"current connection", -1}}, "nothing in use", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.u.String(); got != tt.want {
				t.Errorf("String = %q, want %q", got, tt.want)
			}
			if got := tt.u.Zero(); got != tt.zero {
				t.Errorf("Zero = %v, want %v", got, tt.zero)
			}
		})
	}
}
