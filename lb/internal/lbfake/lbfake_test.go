package lbfake

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// newServer returns a Server whose handler answers the fault kind it got.
func newServer(t *testing.T) *Server {
	t.Helper()
	s := &Server{}
	Start(s, func(w http.ResponseWriter, _ *http.Request, body []byte, fault FaultKind) {
		_, _ = io.WriteString(w, strconv.Itoa(int(fault))+" "+string(body))
	}, false)
	t.Cleanup(s.Close)
	return s
}

func send(t *testing.T, s *Server, method, path, body string) string {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault Fault
		reqs  [][2]string // method, path
		want  []string    // the fault kind each request saw
	}{
		{"once by default", Fault{Kind: Busy}, [][2]string{{"GET", "/a"}, {"GET", "/a"}}, []string{"2", "0"}},
		{"skip then times", Fault{Kind: Denied, Skip: 1, Times: 2}, [][2]string{{"GET", "/a"}, {"GET", "/a"}, {"GET", "/a"}, {"GET", "/a"}}, []string{"0", "3", "3", "0"}},
		{"every later one", Fault{Kind: NotFound, Times: -1}, [][2]string{{"GET", "/a"}, {"GET", "/a"}, {"GET", "/a"}}, []string{"4", "4", "4"}},
		{"method and path match", Fault{Kind: ServerError, Method: "POST", Path: "/x/"}, [][2]string{{"GET", "/x/1"}, {"POST", "/y/1"}, {"POST", "/x/1"}}, []string{"0", "0", "5"}},
		{"Slow is handled and not passed on", Fault{Kind: Slow, Delay: time.Millisecond}, [][2]string{{"GET", "/a"}}, []string{"0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			s.Inject(tt.fault)
			for i, r := range tt.reqs {
				got, _, _ := strings.Cut(send(t, s, r[0], r[1], ""), " ")
				if got != tt.want[i] {
					t.Errorf("request %d (%s %s): fault %s, want %s", i, r[0], r[1], got, tt.want[i])
				}
			}
		})
	}
}

func TestClearRemovesFaults(t *testing.T) {
	s := newServer(t)
	s.Inject(Fault{Kind: Busy, Times: -1})
	s.Clear()
	if got := send(t, s, "GET", "/a", ""); got != "0 " {
		t.Fatalf("after Clear: %q, want no fault", got)
	}
}

func TestRecording(t *testing.T) {
	s := newServer(t)
	if got := send(t, s, "POST", "/p/1", "hello"); got != "0 hello" {
		t.Fatalf("handler got body %q", got)
	}
	send(t, s, "GET", "/p/2", "")
	send(t, s, "GET", "/q", "")
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Method != "POST" || reqs[0].Path != "/p/1" || reqs[0].Body != "hello" || reqs[2].Path != "/q" {
		t.Fatalf("Requests() = %+v", reqs)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{{"", "/p/", 2}, {"GET", "/p/", 1}, {"GET", "", 2}, {"PUT", "", 0}} {
		if got := s.Count(c.method, c.path); got != c.want {
			t.Errorf("Count(%q, %q) = %d, want %d", c.method, c.path, got, c.want)
		}
	}
}

func TestHoldOverlaps(t *testing.T) {
	s := newServer(t)
	s.Hold("/h", 3, time.Minute)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.Client().Get(s.URL() + "/h")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait() // returns only if all three were held at once
	if got := s.MaxInFlight(); got < 3 {
		t.Fatalf("MaxInFlight() = %d, want >= 3", got)
	}
	send(t, s, "GET", "/h", "") // the hold is over: not held
}

func TestCloseReleasesHeld(t *testing.T) {
	s := &Server{}
	Start(s, func(w http.ResponseWriter, _ *http.Request, _ []byte, _ FaultKind) {}, false)
	s.Hold("/h", 2, time.Hour)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := s.Client().Get(s.URL() + "/h")
		if err == nil {
			resp.Body.Close()
		}
	}()
	for s.Count("", "/h") == 0 {
		time.Sleep(time.Millisecond)
	}
	s.Close()
	<-done
	s.Close() // idempotent
}

// The fake serves TLS by default, with a certificate only its own client
// (or a CA file of CertificatePEM) trusts, and plain HTTP when asked: the
// adapters' tests then run over TLS, as against a device.
func TestStartTLSAndPlain(t *testing.T) {
	s := newServer(t)
	if !strings.HasPrefix(s.URL(), "https://127.0.0.1:") || !strings.Contains(string(s.CertificatePEM()), "BEGIN CERTIFICATE") {
		t.Fatalf("URL %q, certificate %q", s.URL(), s.CertificatePEM())
	}
	if got := send(t, s, "GET", "/x", ""); got != "0 " {
		t.Errorf("answer through Client = %q", got)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(s.URL() + "/x")
	if err == nil {
		resp.Body.Close()
		t.Fatal("a client without the fake's certificate was answered")
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("error = %v, want a certificate error", err)
	}
	p := &Server{}
	Start(p, func(w http.ResponseWriter, _ *http.Request, _ []byte, _ FaultKind) { _, _ = io.WriteString(w, "plain") }, true)
	t.Cleanup(p.Close)
	if !strings.HasPrefix(p.URL(), "http://") || p.CertificatePEM() != nil {
		t.Errorf("plain: URL %q, certificate %q", p.URL(), p.CertificatePEM())
	}
	if got := send(t, p, "GET", "/x", ""); got != "plain" {
		t.Errorf("plain answer = %q", got)
	}
}
