package fakes_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/holdfast-db/holdfast/fakes"
)

const secret = "hunter2-s3cret"

func TestPasswordSource(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		step  fakes.Step
		check func(t *testing.T, pw string, err error)
	}{
		{"Connect returns the password", fakes.Connect(), func(t *testing.T, pw string, err error) {
			if err != nil || pw != secret {
				t.Errorf("Password = %q, %v; want the password", pw, err)
			}
		}},
		{"Custom fails with its password error", status(503), func(t *testing.T, pw string, err error) {
			var se *statusError
			if !errors.As(err, &se) || se.at != "password" || se.code != 503 {
				t.Errorf("err = %v, want the password fetch's *statusError 503", err)
			}
		}},
		{"Custom without a password error is a bad step", fakes.Custom("dial-only", func() error { return errSentinel }, nil), func(t *testing.T, pw string, err error) {
			if !errors.Is(err, fakes.ErrBadStep) || !strings.Contains(err.Error(), "dial-only") {
				t.Errorf("err = %v, want ErrBadStep naming the step", err)
			}
		}},
		{"Fail", fakes.Fail(errSentinel), func(t *testing.T, pw string, err error) {
			if err != errSentinel {
				t.Errorf("err = %v, want errSentinel", err)
			}
		}},
		{"Fail(nil)", fakes.Fail(nil), func(t *testing.T, pw string, err error) {
			if !errors.Is(err, fakes.ErrBadStep) {
				t.Errorf("err = %v, want ErrBadStep", err)
			}
		}},
		{"Refused is a bad step", fakes.Refused(), func(t *testing.T, pw string, err error) {
			if !errors.Is(err, fakes.ErrBadStep) || !strings.Contains(err.Error(), "Refused()") {
				t.Errorf("err = %v, want ErrBadStep naming Refused()", err)
			}
		}},
		{"Reset is a bad step", fakes.Reset(), func(t *testing.T, pw string, err error) {
			if !errors.Is(err, fakes.ErrBadStep) {
				t.Errorf("err = %v, want ErrBadStep", err)
			}
		}},
		{"ResetAfter is a bad step", fakes.ResetAfter(10), func(t *testing.T, pw string, err error) {
			if !errors.Is(err, fakes.ErrBadStep) {
				t.Errorf("err = %v, want ErrBadStep", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := fakes.NewPasswordSource(secret, tt.step)
			pw, err := p.Password(testCtx(t), "")
			if err != nil && pw != "" {
				t.Errorf("Password returned %q with an error", pw)
			}
			tt.check(t, pw, err)
			// The script is used up: the password comes back.
			if pw, err := p.Password(testCtx(t), ""); err != nil || pw != secret {
				t.Errorf("second Password = %q, %v; want the password", pw, err)
			}
			wantFail := 0
			if err != nil {
				wantFail = 1
			}
			if p.Attempts() != 2 || p.Failures() != wantFail || p.Successes() != 2-wantFail {
				t.Errorf("attempts/successes/failures = %d/%d/%d, want 2/%d/%d",
					p.Attempts(), p.Successes(), p.Failures(), 2-wantFail, wantFail)
			}
		})
	}
}

func TestPasswordSourceHang(t *testing.T) {
	t.Parallel()
	p := fakes.NewPasswordSource(secret, fakes.Hang())
	parent, cancel := context.WithCancel(context.Background())
	ctx := &watchedCtx{Context: parent, watched: make(chan struct{})}
	type result struct {
		pw  string
		err error
	}
	done := make(chan result, 1)
	go func() {
		pw, err := p.Password(ctx, "")
		done <- result{pw, err}
	}()
	<-ctx.watched
	if p.Failures() != 0 {
		t.Errorf("Failures = %d while hanging, want 0", p.Failures())
	}
	cancel()
	if r := <-done; r.pw != "" || r.err != context.Canceled {
		t.Errorf("Password = %q, %v; want \"\", context.Canceled", r.pw, r.err)
	}
}

func TestPasswordSourceThenSet(t *testing.T) {
	t.Parallel()
	p := fakes.NewPasswordSource(secret)
	p.Then(status(503).Times(2))
	p.Set(fakes.Fail(errSentinel))
	p.Then(status(403))
	var got []string
	for range 3 {
		_, err := p.Password(testCtx(t), "")
		var se *statusError
		switch {
		case err == nil:
			got = append(got, "password")
		case errors.Is(err, errSentinel):
			got = append(got, "fail")
		case errors.As(err, &se):
			got = append(got, fmt.Sprint(se.code))
		default:
			got = append(got, err.Error())
		}
	}
	if want := []string{"fail", "403", "password"}; !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
}

func TestPasswordSourceZero(t *testing.T) {
	t.Parallel()
	var p fakes.PasswordSource
	if pw, err := p.Password(testCtx(t), ""); pw != "" || err != nil {
		t.Errorf("zero PasswordSource: %q, %v; want \"\", nil", pw, err)
	}
	if p.Attempts() != 1 || p.Successes() != 1 {
		t.Errorf("attempts/successes = %d/%d, want 1/1", p.Attempts(), p.Successes())
	}
}

// TestPasswordNotLeaked: the password appears in no error and no formatted
// output of the PasswordSource.
func TestPasswordNotLeaked(t *testing.T) {
	t.Parallel()
	p := fakes.NewPasswordSource(secret,
		status(503), fakes.Custom("no-error", nil, nil), status(403),
		fakes.Refused(), fakes.Reset(), fakes.Fail(nil))
	var outputs []string
	for range 6 {
		_, err := p.Password(testCtx(t), "")
		if err == nil {
			t.Fatal("a failing step returned no error")
		}
		outputs = append(outputs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
	}
	outputs = append(outputs,
		p.String(), p.GoString(),
		fmt.Sprint(p), fmt.Sprintf("%v %+v %#v %s", p, p, p, p),
		// A copy of the struct value, printed field by field.
		fmt.Sprintf("%v %+v %#v", reflect.ValueOf(p).Elem(), reflect.ValueOf(p).Elem(), reflect.ValueOf(p).Elem()),
		fmt.Sprintf("%+v", struct{ P *fakes.PasswordSource }{p}),
	)
	for _, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("output contains the password: %q", out)
		}
	}
	if !strings.Contains(p.String(), "redacted") {
		t.Errorf("String() = %q, want it to say the password is redacted", p.String())
	}
	var nilSource *fakes.PasswordSource
	if got := nilSource.String(); got != "fakes.PasswordSource(nil)" {
		t.Errorf("nil String() = %q", got)
	}
}

func TestConcurrentPasswords(t *testing.T) {
	t.Parallel()
	p := fakes.NewPasswordSource(secret, status(503).Times(30))
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pw, err := p.Password(ctx, "")
			var se *statusError
			key := "other"
			switch {
			case err == nil && pw == secret:
				key = "password"
			case errors.As(err, &se):
				key = "status503"
			}
			mu.Lock()
			counts[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if counts["status503"] != 30 || counts["password"] != 70 {
		t.Errorf("outcomes = %v, want 30 status503, 70 password", counts)
	}
	if p.Attempts() != 100 || p.Failures() != 30 || p.Successes() != 70 {
		t.Errorf("attempts/successes/failures = %d/%d/%d, want 100/70/30", p.Attempts(), p.Successes(), p.Failures())
	}
}
