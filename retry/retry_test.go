package retry_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/retry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errTransient = errors.New("test: transient")
	errFatal     = errors.New("test: fatal")
)

// testClassify treats errTransient and deadline errors as transient.
func testClassify(err error) classify.Verdict {
	switch {
	case errors.Is(err, errTransient):
		return classify.Verdict{Class: classify.Transient, Reason: "test-transient"}
	case errors.Is(err, context.DeadlineExceeded):
		return classify.Verdict{Class: classify.Transient, Reason: "timeout"}
	}
	return classify.Verdict{Class: classify.Fatal, Reason: "test-fatal"}
}

func fast() retry.Policy {
	p := retry.Default()
	p.InitialInterval = time.Microsecond
	p.MaxInterval = time.Microsecond
	return p
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	if err := retry.Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	tests := []struct {
		name  string
		edit  func(*retry.Policy)
		field string
	}{
		{"zero attempts", func(p *retry.Policy) { p.MaxAttempts = 0 }, "MaxAttempts"},
		{"negative attempts", func(p *retry.Policy) { p.MaxAttempts = -1 }, "MaxAttempts"},
		{"zero interval", func(p *retry.Policy) { p.InitialInterval = 0 }, "InitialInterval"},
		{"negative interval", func(p *retry.Policy) { p.InitialInterval = -time.Second }, "InitialInterval"},
		{"shrinking multiplier", func(p *retry.Policy) { p.Multiplier = 0.5 }, "Multiplier"},
		{"NaN multiplier", func(p *retry.Policy) { p.Multiplier = nan() }, "Multiplier"},
		{"jitter above one", func(p *retry.Policy) { p.Jitter = 1.5 }, "Jitter"},
		{"negative jitter", func(p *retry.Policy) { p.Jitter = -0.1 }, "Jitter"},
		{"max below initial", func(p *retry.Policy) { p.MaxInterval = time.Millisecond }, "MaxInterval"},
		{"negative elapsed", func(p *retry.Policy) { p.MaxElapsed = -1 }, "MaxElapsed"},
		{"negative attempt timeout", func(p *retry.Policy) { p.AttemptTimeout = -1 }, "AttemptTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := retry.Default()
			tt.edit(&p)
			err := p.Validate()
			var ipe *retry.InvalidPolicyError
			if !errors.As(err, &ipe) || ipe.Field != tt.field || !errors.Is(err, retry.ErrInvalidPolicy) {
				t.Fatalf("Validate() = %v, want InvalidPolicyError on %s", err, tt.field)
			}
			// Do refuses an invalid policy without running the operation.
			r := &retry.Retrier{Policy: p}
			ran := false
			if err := r.Do(context.Background(), func(context.Context) error { ran = true; return nil }); !errors.Is(err, retry.ErrInvalidPolicy) || ran {
				t.Fatalf("Do with invalid policy = %v (ran=%v)", err, ran)
			}
		})
	}
}

// A partial Policy literal (issue 29, item 9) is refused with a message
// that names retry.Default(), the Policy to start from (a zero Jitter,
// MaxElapsed or AttemptTimeout means "none", so it is not completed); a
// nonsense value that is not a left-out field is not told so.
func TestPartialPolicyNamesDefault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		p     retry.Policy
		field string
		hint  bool
	}{
		{"only MaxAttempts", retry.Policy{MaxAttempts: 5}, "InitialInterval", true},
		{"only the intervals", retry.Policy{InitialInterval: time.Second, MaxInterval: time.Minute}, "MaxAttempts", true},
		{"no Multiplier", retry.Policy{MaxAttempts: 2, InitialInterval: time.Second}, "Multiplier", true},
		{"no MaxInterval", retry.Policy{MaxAttempts: 2, InitialInterval: time.Second, Multiplier: 2}, "MaxInterval", true},
		{"the zero Policy", retry.Policy{}, "MaxAttempts", true},
		{"negative attempts", retry.Policy{MaxAttempts: -1}, "MaxAttempts", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.p.Validate()
			var ipe *retry.InvalidPolicyError
			if !errors.As(err, &ipe) || ipe.Field != tt.field {
				t.Fatalf("Validate() = %v, want an *InvalidPolicyError on %s", err, tt.field)
			}
			if got := strings.Contains(err.Error(), "retry.Default()"); got != tt.hint {
				t.Errorf("Validate() = %q: names retry.Default() %v, want %v", err, got, tt.hint)
			}
		})
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestDo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		script    []error // results of successive attempts; the last repeats
		wantCalls int
		wantStop  retry.StopReason // 0 = success
		wantIs    error
	}{
		{"success at once", []error{nil}, 1, 0, nil},
		{"transient then success", []error{errTransient, nil}, 2, 0, nil},
		{"two transient then success", []error{errTransient, errTransient, nil}, 3, 0, nil},
		{"transient forever", []error{errTransient}, 3, retry.StopExhausted, retry.ErrExhausted},
		{"fatal at once", []error{errFatal}, 1, retry.StopFatal, retry.ErrNotRetryable},
		{"transient then fatal", []error{errTransient, errFatal}, 2, retry.StopFatal, retry.ErrNotRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls int
			var events []retry.Event
			r := &retry.Retrier{Policy: fast(), Classify: testClassify,
				OnRetry: func(_ context.Context, e retry.Event) { events = append(events, e) }}
			err := r.Do(context.Background(), func(context.Context) error {
				calls++
				return tt.script[min(calls, len(tt.script))-1]
			})
			if calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
			if tt.wantStop == 0 {
				if err != nil {
					t.Fatalf("Do = %v, want nil", err)
				}
			} else {
				var re *retry.Error
				if !errors.As(err, &re) {
					t.Fatalf("Do = %v, want *retry.Error", err)
				}
				if re.Stop != tt.wantStop || re.Attempts != calls || !errors.Is(err, tt.wantIs) {
					t.Errorf("Error = %+v, want stop %v after %d attempts, Is %v", re, tt.wantStop, calls, tt.wantIs)
				}
				last := tt.script[min(calls, len(tt.script))-1]
				if !errors.Is(err, last) {
					t.Errorf("errors.Is(err, last cause) = false; err = %v", err)
				}
				if re.Retryable() != (tt.wantStop == retry.StopExhausted) {
					t.Errorf("Retryable() = %v", re.Retryable())
				}
			}
			// One OnRetry event per retried failure, numbered from 1.
			for i, e := range events {
				if e.Attempt != i+1 || !errors.Is(e.Err, errTransient) || e.Verdict.Reason != "test-transient" {
					t.Errorf("event %d = %+v", i, e)
				}
			}
			if want := min(calls, 3) - 1; tt.wantStop == retry.StopExhausted && len(events) != want {
				t.Errorf("events = %d, want %d", len(events), want)
			}
		})
	}
}

func TestDoDelays(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 5, InitialInterval: time.Millisecond, Multiplier: 2,
		Jitter: 0.5, MaxInterval: 4 * time.Millisecond}
	var delays []time.Duration
	r := &retry.Retrier{Policy: p, Classify: testClassify,
		OnRetry: func(_ context.Context, e retry.Event) { delays = append(delays, e.Delay) }}
	_ = r.Do(context.Background(), func(context.Context) error { return errTransient })
	base := []time.Duration{1, 2, 4, 4} // ms: doubling, capped at MaxInterval
	if len(delays) != len(base) {
		t.Fatalf("delays = %v, want %d of them", delays, len(base))
	}
	for i, d := range delays {
		lo, hi := base[i]*time.Millisecond/2, base[i]*time.Millisecond*3/2
		if d < lo || d > hi {
			t.Errorf("delay %d = %v, want within [%v, %v]", i+1, d, lo, hi)
		}
	}
}

func TestDoCancelStopsAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := retry.Default()
	p.InitialInterval, p.MaxInterval, p.MaxElapsed = time.Hour, time.Hour, 0
	calls := 0
	r := &retry.Retrier{Policy: p, Classify: testClassify,
		// The cancel arrives while the loop is about to sleep for an hour.
		OnRetry: func(context.Context, retry.Event) { cancel() }}
	err := r.Do(ctx, func(context.Context) error { calls++; return errTransient })
	var re *retry.Error
	if !errors.As(err, &re) || re.Stop != retry.StopContext {
		t.Fatalf("Do = %v, want StopContext", err)
	}
	if calls != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, errTransient) || re.Retryable() {
		t.Fatalf("calls=%d err=%v", calls, err)
	}
}

func TestDoCanceledDuringAttempt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	r := &retry.Retrier{Policy: fast(), Classify: testClassify}
	calls := 0
	err := r.Do(ctx, func(ctx context.Context) error {
		calls++
		cancel()
		<-ctx.Done()
		return errTransient // transient, but the caller has gone
	})
	if calls != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("calls=%d err=%v, want one call and context.Canceled", calls, err)
	}
}

func TestDoNeverSleepsPastDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := retry.Default()
	p.InitialInterval, p.MaxInterval = time.Hour, time.Hour
	calls := 0
	err := (&retry.Retrier{Policy: p, Classify: testClassify}).Do(ctx, func(context.Context) error { calls++; return errTransient })
	var re *retry.Error
	if !errors.As(err, &re) || re.Stop != retry.StopDeadline || calls != 1 || !errors.Is(err, retry.ErrExhausted) {
		t.Fatalf("Do = %v after %d calls, want StopDeadline after 1", err, calls)
	}
	if ctx.Err() != nil {
		t.Fatal("Do waited for the deadline instead of stopping at once")
	}
}

// TestDoNeverSleepsPastCallerDeadline: a caller's deadline carried by
// WithCallerDeadline stops the loop before a sleep that would overrun it,
// and cancels nothing: the attempt runs on the context, undisturbed.
func TestDoNeverSleepsPastCallerDeadline(t *testing.T) {
	t.Parallel()
	p := retry.Default()
	p.InitialInterval, p.MaxInterval, p.Jitter, p.AttemptTimeout = time.Second, time.Second, 0, 0
	start := time.Now()
	ctx := retry.WithCallerDeadline(context.Background(), start.Add(600*time.Millisecond))
	if later := retry.WithCallerDeadline(ctx, start.Add(time.Hour)); later != ctx {
		t.Error("a later caller deadline replaced an earlier one")
	}
	calls := 0
	err := (&retry.Retrier{Policy: p, Classify: testClassify}).Do(ctx, func(ctx context.Context) error {
		calls++
		if _, ok := ctx.Deadline(); ok {
			t.Error("the caller's deadline became the attempt's")
		}
		return errTransient
	})
	var re *retry.Error
	if !errors.As(err, &re) || re.Stop != retry.StopDeadline || calls != 1 {
		t.Fatalf("Do = %v after %d calls, want StopDeadline after 1", err, calls)
	}
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Errorf("Do took %v: it slept toward the caller's deadline", took)
	}
	if got, ok := retry.CallerDeadline(ctx); !ok || !got.Equal(start.Add(600*time.Millisecond)) {
		t.Errorf("CallerDeadline = %v, %v", got, ok)
	}
}

func TestDoAttemptTimeout(t *testing.T) {
	t.Parallel()
	p := fast()
	p.AttemptTimeout = 5 * time.Millisecond
	calls := 0
	err := (&retry.Retrier{Policy: p, Classify: testClassify}).Do(context.Background(), func(ctx context.Context) error {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("attempt context has no deadline")
		}
		<-ctx.Done() // a connect that never answers
		return ctx.Err()
	})
	if calls != 3 || !errors.Is(err, retry.ErrExhausted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("calls=%d err=%v, want 3 timed-out attempts", calls, err)
	}
}

func TestDoMaxElapsed(t *testing.T) {
	t.Parallel()
	p := fast()
	p.MaxAttempts = 1 << 30
	p.MaxElapsed = 20 * time.Millisecond
	calls := 0
	err := (&retry.Retrier{Policy: p, Classify: testClassify}).Do(context.Background(), func(ctx context.Context) error {
		calls++
		if calls > 1 {
			if _, ok := ctx.Deadline(); !ok {
				t.Fatal("a retry runs without the MaxElapsed deadline")
			}
		}
		return errTransient
	})
	var re *retry.Error
	if !errors.As(err, &re) || (re.Stop != retry.StopContext && re.Stop != retry.StopDeadline) || calls < 2 {
		t.Fatalf("Do = %v after %d calls, want the loop bounded by MaxElapsed", err, calls)
	}
}

func TestContinue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		first     error
		rest      error
		wantCalls int // calls of op (the first attempt was made by the caller)
		wantErr   error
	}{
		{"first attempt succeeded", nil, nil, 0, nil},
		{"transient, then success", errTransient, nil, 1, nil},
		{"transient forever", errTransient, errTransient, 2, retry.ErrExhausted},
		{"fatal first", errFatal, nil, 0, retry.ErrNotRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			err := (&retry.Retrier{Policy: fast(), Classify: testClassify}).Continue(context.Background(), tt.first,
				func(context.Context) error { calls++; return tt.rest })
			if calls != tt.wantCalls || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Continue = %v after %d calls; want %v after %d", err, calls, tt.wantErr, tt.wantCalls)
			}
			var re *retry.Error
			if errors.As(err, &re) && re.Attempts != calls+1 {
				t.Errorf("Attempts = %d, want %d (the caller's attempt counts)", re.Attempts, calls+1)
			}
		})
	}
}

func TestZeroRetrierUsesDefaults(t *testing.T) {
	t.Parallel()
	var r retry.Retrier
	calls := 0
	// classify.Classify is Fatal for an error it does not know.
	err := r.Do(context.Background(), func(context.Context) error { calls++; return errTransient })
	if calls != 1 || !errors.Is(err, retry.ErrNotRetryable) {
		t.Fatalf("calls=%d err=%v", calls, err)
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	e := &retry.Error{Attempts: 3, Last: errTransient, Stop: retry.StopExhausted,
		Verdict: classify.Verdict{Class: classify.Transient, Reason: "token-fetch-503"}}
	want := "retry: gave up after 3 attempts (attempts exhausted; transient token-fetch-503): test: transient"
	if got := e.Error(); got != want {
		t.Errorf("Error() = %q\nwant      %q", got, want)
	}
}

func TestBudgetConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  retry.BudgetConfig
	}{
		{"zero", retry.BudgetConfig{}},
		{"negative capacity", retry.BudgetConfig{Capacity: -1, RetryCost: 1}},
		{"zero cost", retry.BudgetConfig{Capacity: 10}},
		{"cost above capacity", retry.BudgetConfig{Capacity: 1, RetryCost: 2}},
		{"negative refill", retry.BudgetConfig{Capacity: 10, RetryCost: 1, SuccessRefill: -1}},
		{"NaN per second", retry.BudgetConfig{Capacity: 10, RetryCost: 1, RefillPerSecond: nan()}},
		{"negative failure cost", retry.BudgetConfig{Capacity: 10, RetryCost: 1, FailureCost: -1}},
		{"NaN failure cost", retry.BudgetConfig{Capacity: 10, FailureCost: nan()}},
		{"negative threshold", retry.BudgetConfig{Capacity: 10, FailureCost: 1, Threshold: -1}},
		{"threshold at capacity", retry.BudgetConfig{Capacity: 5, FailureCost: 1, Threshold: 5}},
		{"negative cost with failure cost", retry.BudgetConfig{Capacity: 5, FailureCost: 1, RetryCost: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if b, err := retry.NewBudget(tt.cfg); !errors.Is(err, retry.ErrInvalidPolicy) || b != nil {
				t.Fatalf("NewBudget(%+v) = %v, %v; want an InvalidPolicyError", tt.cfg, b, err)
			}
		})
	}
	for _, c := range []retry.BudgetConfig{
		retry.DefaultBudget(),
		retry.DemandBudget(),
		{Capacity: 100, RetryCost: 5, SuccessRefill: 1, RefillPerSecond: 1}, // the plain bucket, as configs before FailureCost wrote it
		{Capacity: 1, RetryCost: 1},
		{Capacity: 10, FailureCost: 1}, // gRPC with no threshold: a retry costs nothing but its failure
	} {
		if _, err := retry.NewBudget(c); err != nil {
			t.Errorf("NewBudget(%+v) = %v, want valid", c, err)
		}
	}
	var ipe *retry.InvalidPolicyError
	if _, err := retry.NewBudget(retry.BudgetConfig{Capacity: 5, FailureCost: 1, Threshold: 7}); !errors.As(err, &ipe) || ipe.Field != "Budget.Threshold" {
		t.Errorf("Threshold above Capacity: %v, want an *InvalidPolicyError for Budget.Threshold", err)
	}
}

// The budget relative to demand, step by step against gRPC's rule: every
// failed attempt takes FailureCost, a retry runs only while more than
// Threshold tokens are left, successes and time refill.
func TestDemandBudgetSteps(t *testing.T) {
	t.Parallel()
	type step struct {
		op     string // "spend" (a failure to retry), "fail" (a failure not retried), "success", or "wait" (one second)
		allow  bool   // for spend
		tokens float64
	}
	tests := []struct {
		name  string
		cfg   retry.BudgetConfig
		steps []step
	}{
		{"gRPC's own test: 4 tokens, threshold 2, 1.6 a success", retry.BudgetConfig{Capacity: 4, FailureCost: 1, Threshold: 2, SuccessRefill: 1.6}, []step{
			{"spend", true, 3}, {"success", false, 4}, {"spend", true, 3}, {"spend", false, 2}, {"spend", false, 1},
			{"success", false, 2.6}, {"spend", false, 1.6}, {"success", false, 3.2}, {"spend", true, 2.2}, {"spend", false, 1.2},
		}},
		{"DemandBudget: two retries from full, then none", retry.DemandBudget(), []step{
			{"spend", true, 4}, {"spend", true, 3}, {"spend", false, 2}, {"fail", false, 1}, {"fail", false, 0}, {"fail", false, 0},
		}},
		{"DemandBudget: a lone failure now and then is always retried", retry.DemandBudget(), []step{
			{"spend", true, 4}, {"success", false, 4.1}, {"wait", false, 4.3}, {"wait", false, 4.5},
			{"spend", true, 3.5}, {"wait", false, 3.7}, {"wait", false, 3.9}, {"wait", false, 4.1}, {"spend", true, 3.1},
		}},
		{"DemandBudget: time refills after an outage", retry.DemandBudget(), []step{
			{"fail", false, 4}, {"fail", false, 3}, {"fail", false, 2}, {"fail", false, 1}, {"fail", false, 0},
			{"wait", false, 0.2}, {"spend", false, 0}, // failing faster than the refill: stays empty
			{"wait", false, 0.2}, {"wait", false, 0.4}, {"wait", false, 0.6}, {"wait", false, 0.8}, {"wait", false, 1},
			{"wait", false, 1.2}, {"wait", false, 1.4}, {"wait", false, 1.6}, {"wait", false, 1.8}, {"wait", false, 2},
			{"wait", false, 2.2}, {"wait", false, 2.4}, {"wait", false, 2.6}, {"wait", false, 2.8}, {"wait", false, 3},
			{"wait", false, 3.2}, {"wait", false, 3.4}, {"wait", false, 3.6}, {"spend", true, 2.6},
		}},
		{"plain bucket: failures not retried cost nothing", retry.BudgetConfig{Capacity: 10, RetryCost: 5}, []step{
			{"fail", false, 10}, {"spend", true, 5}, {"fail", false, 5}, {"spend", true, 0}, {"spend", false, 0},
		}},
		{"both costs: the failure first, then the retry", retry.BudgetConfig{Capacity: 10, RetryCost: 2, FailureCost: 1, Threshold: 3}, []step{
			{"spend", true, 7}, {"spend", true, 4}, {"spend", false, 3},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := retry.NewBudget(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(1000, 0)
			retry.SetBudgetClock(b, func() time.Time { return now })
			for i, st := range tt.steps {
				switch st.op {
				case "spend":
					if got := b.Spend(); got != st.allow {
						t.Fatalf("step %d: Spend() = %v, want %v", i, got, st.allow)
					}
				case "fail":
					b.Failure()
				case "success":
					b.Success()
				case "wait":
					now = now.Add(time.Second)
					retry.RefillBudget(b)
				}
				if math.Abs(b.Available()-st.tokens) > 1e-9 {
					t.Fatalf("step %d (%s): %v tokens, want %v", i, st.op, b.Available(), st.tokens)
				}
			}
		})
	}
}

func TestBudgetCapsRetriesAcrossGoroutines(t *testing.T) {
	t.Parallel()
	b, err := retry.NewBudget(retry.BudgetConfig{Capacity: 10, RetryCost: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := &retry.Retrier{Policy: fast(), Classify: testClassify, Budget: b}
	var calls atomic.Int64
	var budgetStops atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			err := r.Do(context.Background(), func(context.Context) error { calls.Add(1); return errTransient })
			if errors.Is(err, retry.ErrBudgetExhausted) {
				budgetStops.Add(1)
			}
		})
	}
	wg.Wait()
	// 50 first attempts always run; only 10 retries fit the budget.
	if got := calls.Load(); got != 60 {
		t.Errorf("calls = %d, want 50 first attempts + 10 retries", got)
	}
	if b.Retries() != 10 || b.Denied() != budgetStops.Load() || b.Denied() < 40 {
		t.Errorf("Retries=%d Denied=%d budgetStops=%d", b.Retries(), b.Denied(), budgetStops.Load())
	}
}

func TestBudgetRefill(t *testing.T) {
	t.Parallel()
	b, _ := retry.NewBudget(retry.BudgetConfig{Capacity: 4, RetryCost: 2, SuccessRefill: 1, RefillPerSecond: 0.5})
	now := time.Unix(1000, 0)
	retry.SetBudgetClock(b, func() time.Time { return now })
	spends := func(n int) (allowed int) {
		for range n {
			if b.Spend() {
				allowed++
			}
		}
		return allowed
	}
	if got := spends(3); got != 2 {
		t.Fatalf("a full bucket of 4 allowed %d of 3 retries of cost 2, want 2", got)
	}
	b.Success()
	b.Success() // two successes refund one retry
	if got := spends(2); got != 1 {
		t.Fatalf("two successes of 1 allowed %d retries of cost 2, want 1", got)
	}
	now = now.Add(4 * time.Second) // 0.5/s for 4s = 2 tokens
	if got := spends(2); got != 1 {
		t.Fatalf("4 seconds at 0.5/s allowed %d retries, want 1", got)
	}
	for range 100 {
		b.Success()
	}
	if got := b.Available(); got != 4 {
		t.Fatalf("Available = %v, want capped at capacity 4", got)
	}
}

// A lone transient failure in a healthy pool is retried at once under the
// budget relative to demand, and one loop keeps its three attempts; many
// goroutines failing together get two retries between them, whatever
// their number, where the plain bucket gives a fixed allowance.
func TestDemandBudgetThroughDo(t *testing.T) {
	t.Parallel()
	b, err := retry.NewBudget(retry.DemandBudget())
	if err != nil {
		t.Fatal(err)
	}
	r := &retry.Retrier{Policy: fast(), Classify: testClassify, Budget: b}
	calls := 0
	if err := r.Do(context.Background(), func(context.Context) error {
		if calls++; calls == 1 {
			return errTransient // a token API's 503
		}
		return nil
	}); err != nil || calls != 2 {
		t.Fatalf("a lone failure: Do = %v after %d calls, want nil after 2", err, calls)
	}

	b, _ = retry.NewBudget(retry.DemandBudget())
	r.Budget = b
	calls = 0
	err = r.Do(context.Background(), func(context.Context) error { calls++; return errTransient })
	if !errors.Is(err, retry.ErrExhausted) || calls != 3 {
		t.Fatalf("one loop from a full bucket: Do = %v after %d calls, want attempts exhausted after 3", err, calls)
	}

	for _, n := range []int{10, 200} {
		b, _ := retry.NewBudget(retry.BudgetConfig{Capacity: 5, FailureCost: 1, Threshold: 2.5}) // DemandBudget without the time refill
		r := &retry.Retrier{Policy: fast(), Classify: testClassify, Budget: b}
		var calls atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				_ = r.Do(context.Background(), func(context.Context) error { calls.Add(1); return errTransient })
			})
		}
		wg.Wait()
		if b.Retries() != 2 || calls.Load() != int64(n)+2 || b.Failures() != int64(n)+2 || b.Available() != 0 {
			t.Errorf("%d goroutines failing: %d retries, %d calls, %d failures charged, %v tokens; want 2, %d, %d, 0",
				n, b.Retries(), calls.Load(), b.Failures(), b.Available(), n+2, n+2)
		}
	}
}

// A success refills the budget, unless NoRefund: an operation that
// succeeded after a retry (a dial a front end accepted) refunds nothing
// when its success does not show that the failure is over.
func TestNoRefund(t *testing.T) {
	t.Parallel()
	for _, noRefund := range []bool{false, true} {
		b, _ := retry.NewBudget(retry.BudgetConfig{Capacity: 10, RetryCost: 5, SuccessRefill: 1})
		r := &retry.Retrier{Policy: fast(), Classify: testClassify, Budget: b, NoRefund: noRefund}
		calls := 0
		err := r.Do(context.Background(), func(context.Context) error {
			if calls++; calls == 1 {
				return errTransient
			}
			return nil
		})
		want := 6.0 // 10, less 5 for the retry, plus 1 for the success
		if noRefund {
			want = 5
		}
		if err != nil || b.Available() != want {
			t.Errorf("NoRefund %v: Do = %v, Available = %v, want nil, %v", noRefund, err, b.Available(), want)
		}
	}
}

func TestNilBudgetAllows(t *testing.T) {
	t.Parallel()
	var b *retry.Budget
	if !b.Spend() || b.Retries() != 0 || b.Denied() != 0 {
		t.Fatal("nil budget must allow every retry")
	}
	b.Success()
}

// On success Do allocates nothing but, with an AttemptTimeout, the
// attempt's timeout context (as its documentation says).
func TestDoSuccessAllocations(t *testing.T) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	for _, tc := range []struct {
		timeout time.Duration
		want    float64
	}{{0, 0}, {time.Second, 4}} {
		p := fast()
		p.AttemptTimeout = tc.timeout
		r := &retry.Retrier{Policy: p, Classify: testClassify}
		if n := testing.AllocsPerRun(100, func() { _ = r.Do(ctx, op) }); n != tc.want {
			t.Errorf("AttemptTimeout %v: Do allocates %v times on success, want %v", tc.timeout, n, tc.want)
		}
	}
}

func BenchmarkDoSuccess(b *testing.B) {
	r := &retry.Retrier{Policy: fast(), Classify: testClassify}
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Do(ctx, op)
	}
}

func BenchmarkBudgetSpendDemand(b *testing.B) {
	bud, _ := retry.NewBudget(retry.DemandBudget())
	b.ReportAllocs()
	for b.Loop() {
		bud.Spend()
		bud.Success()
	}
}

func BenchmarkBudgetSuccessFull(b *testing.B) {
	bud, _ := retry.NewBudget(retry.DefaultBudget())
	b.ReportAllocs()
	for b.Loop() {
		bud.Success()
	}
}

// TestExemptFromBudget: a failure whose verdict the Retrier's Exempt
// exempts is neither charged to the budget nor refused by it, even from a
// bucket at its threshold; other failures of the same loop still are.
func TestExemptFromBudget(t *testing.T) {
	t.Parallel()
	errFresh := errors.New("refused password, retried with a fresh one")
	classifier := func(err error) classify.Verdict {
		if errors.Is(err, errFresh) {
			return classify.Verdict{Class: classify.Transient, Reason: "fresh"}
		}
		return testClassify(err)
	}
	b, err := retry.NewBudget(retry.DemandBudget())
	if err != nil {
		t.Fatal(err)
	}
	drain := &retry.Retrier{Policy: fast(), Classify: testClassify, Budget: b}
	_ = drain.Do(context.Background(), func(context.Context) error { return errTransient }) // 3 failures: 2 tokens left, at the threshold
	left := b.Available()
	r := &retry.Retrier{Policy: fast(), Classify: classifier, Budget: b,
		Exempt: func(v classify.Verdict) bool { return v.Reason == "fresh" }}
	calls := 0
	if err := r.Do(context.Background(), func(context.Context) error {
		if calls++; calls == 1 {
			return errFresh
		}
		return nil
	}); err != nil || calls != 2 {
		t.Fatalf("an exempt failure from a drained bucket: Do = %v after %d calls, want nil after 2", err, calls)
	}
	if b.Denied() != 0 || b.Available() < left {
		t.Errorf("after the exempt retry: %d refused, %v tokens (before %v); want none refused and nothing taken", b.Denied(), b.Available(), left)
	}
	calls = 0
	err = r.Do(context.Background(), func(context.Context) error { calls++; return errTransient })
	if !errors.Is(err, retry.ErrBudgetExhausted) || calls != 1 {
		t.Errorf("a failure Exempt does not exempt: Do = %v after %d calls, want the budget exhausted after 1", err, calls)
	}
}
