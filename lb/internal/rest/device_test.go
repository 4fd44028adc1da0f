package rest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/lb"
)

// device answers 401 to any credential but the current one, and its
// error bodies are their text.
func device(t *testing.T) (*Device, *int) {
	t.Helper()
	current, logins := "", 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Cred") != current {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("expired " + r.Header.Get("X-Cred")))
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	d := &Device{}
	dialect := Dialect{
		Vendor:  "v",
		Header:  func(cred string) http.Header { return http.Header{"X-Cred": {cred}} },
		OK:      func(status int) bool { return status == http.StatusOK },
		Expired: func(resp *Response) bool { return resp.Status == http.StatusUnauthorized },
		Read: func(resp *Response) (int64, string, lb.Kind) {
			return 0, string(resp.Body), StatusKind(resp.Status)
		},
	}
	relogin := func(context.Context) error {
		logins++
		current = "cred" + strings.Repeat("+", logins)
		d.Session.Set(current)
		return nil
	}
	d.Init(dialect, srv.Client(), srv.URL+"/", "secret", relogin)
	return d, &logins
}

func TestDeviceCallLogsInAgainOnce(t *testing.T) {
	ctx := context.Background()
	d, logins := device(t)
	if _, err := d.Call(ctx, "state", "m", http.MethodGet, "/x", nil); err == nil || !strings.Contains(err.Error(), "not logged in") {
		t.Fatalf("Call without a session = %v, want not logged in", err)
	}
	d.Session.Set("stale")
	resp, err := d.Call(ctx, "state", "m", http.MethodGet, "/x", nil)
	if err != nil || string(resp.Body) != "ok" || *logins != 1 {
		t.Fatalf("Call with an expired session = %v, %v after %d logins; want ok after one", resp, err, *logins)
	}
	if _, err := d.Call(ctx, "state", "m", http.MethodGet, "/x", nil); err != nil || *logins != 1 {
		t.Fatalf("Call with a fresh session = %v after %d logins", err, *logins)
	}
}

func TestDeviceErrors(t *testing.T) {
	d, _ := device(t)
	d.Session.Set("secret-token")
	_, e := d.Send(context.Background(), "logout", http.MethodPost, "/x", d.Header("secret-token"), nil)
	if e == nil || e.Status != http.StatusUnauthorized || e.Kind != lb.KindRejected || e.Vendor != "v" || e.Op != "logout" || strings.Contains(e.Message, "secret-token") {
		t.Fatalf("Send = %+v, want a redacted 401 (rejected by StatusKind)", e)
	}
	te := d.TransportError("state", "m", errors.New("eof"))
	if te.Kind != lb.KindUnavailable || te.Status != 0 {
		t.Errorf("TransportError = %+v", te)
	}
	for status, want := range map[int]lb.Kind{403: lb.KindNoPrivilege, 404: lb.KindNotFound, 503: lb.KindBusy, 500: lb.KindUnavailable, 409: lb.KindRejected, 302: lb.KindBadResponse} {
		if got := StatusKind(status); got != want {
			t.Errorf("StatusKind(%d) = %v, want %v", status, got, want)
		}
	}
}

// TestDeviceNeverFollowsARedirect: a device (or whatever answers in its
// place) that redirects a login elsewhere receives an error answer, and
// the other host never sees the password in the body nor the session
// header (307 and 308 keep the method and the body, and Go's client
// forwards custom headers such as X-F5-Auth-Token to another host).
func TestDeviceNeverFollowsARedirect(t *testing.T) {
	got := make(chan string, 4)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.Path
	}))
	t.Cleanup(elsewhere.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	d := &Device{}
	d.Init(Dialect{
		Vendor: "v", Header: func(cred string) http.Header { return http.Header{"X-Cred": {cred}} },
		OK: func(status int) bool { return status == http.StatusOK }, Expired: func(*Response) bool { return false },
		Read: func(resp *Response) (int64, string, lb.Kind) { return 0, "", StatusKind(resp.Status) },
	}, srv.Client(), srv.URL, "secret", func(context.Context) error { return nil })
	_, e := d.Send(context.Background(), "login", http.MethodPost, "/login", nil, map[string]string{"password": "secret"})
	if e == nil || e.Status != http.StatusTemporaryRedirect {
		t.Fatalf("Send = %v, want the 307 as an error answer", e)
	}
	d.Session.Set("token")
	if _, err := d.Call(context.Background(), "state", "m", http.MethodGet, "/x", nil); err == nil {
		t.Fatal("Call followed the redirect")
	}
	select {
	case r := <-got:
		t.Fatalf("the other host received %s", r)
	default:
	}
}
