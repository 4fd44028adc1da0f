// Package amtest starts a real Alertmanager for the lb module's tests, as
// internal/pgtest starts PostgreSQL.
//
// [Start] finds the binary ($HOLDFAST_ALERTMANAGER, else
// prometheus-alertmanager or alertmanager on PATH; Debian's package
// prometheus-alertmanager installs /usr/bin/prometheus-alertmanager),
// writes a configuration with one receiver that sends nothing, and starts
// it on a free loopback port with its own storage directory and
// clustering off, then waits (bounded) until /-/ready answers. Without a
// binary the test is skipped, or failed when HOLDFAST_REQUIRE_ALERTMANAGER=1,
// as in CI. The process is stopped when the test ends.
package amtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/lb/internal/testbin"
)

// EnvRequire names the variable that, set to "1", fails rather than skips
// a test when no Alertmanager is installed.
const EnvRequire = "HOLDFAST_REQUIRE_ALERTMANAGER"

// EnvPath names the variable that, when set, is the binary's path.
const EnvPath = "HOLDFAST_ALERTMANAGER"

// startTimeout bounds starting the server.
const startTimeout = 30 * time.Second

const config = `route:
  receiver: "null"
  group_wait: 1s
receivers:
  - name: "null"
`

// Path returns the binary's path, or "".
func Path() string { return testbin.Find(EnvPath, "prometheus-alertmanager", "alertmanager") }

// Server is a running Alertmanager.
type Server struct {
	URL string        // "http://127.0.0.1:PORT"
	Log func() string // the process's output so far (its first MiB)

	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// Start starts an Alertmanager for the test, stopped when it ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Path()
	if bin == "" {
		testbin.Missing(t, EnvRequire, "amtest: no Alertmanager (install the Debian package prometheus-alertmanager, or set "+EnvPath+")")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(bin, cfg, filepath.Join(dir, "data"+strconv.Itoa(attempt)), filepath.Join(dir, "log"+strconv.Itoa(attempt)))
		if err == nil {
			t.Cleanup(s.stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("amtest: %v", lastErr)
	return nil
}

// start starts the server with its storage directory and its output in
// the file logFile.
func start(bin, cfg, storage, logFile string) (*Server, error) {
	addr, _, err := testbin.FreeAddr()
	if err != nil {
		return nil, err
	}
	logs, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer logs.Close() // the process has its own descriptor
	log := func() string {
		b, _ := os.ReadFile(logFile)
		return string(b[:min(len(b), 1<<20)])
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.path="+storage, "--web.listen-address="+addr,
		"--cluster.listen-address=", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	s := &Server{URL: "http://" + addr, Log: log, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, errors.New("alertmanager exited at start:\n" + log())
		case <-ctx.Done():
			s.stop()
			return nil, errors.New("alertmanager not ready within " + startTimeout.String() + ":\n" + log())
		case <-tick.C:
		}
	}
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (s *Server) stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
}

// Silence is a silence as the API lists it.
type Silence struct {
	ID     string `json:"id"`
	Status struct {
		State string `json:"state"` // active, pending, expired
	} `json:"status"`
	Matchers []struct {
		Name    string `json:"name"`
		Value   string `json:"value"`
		IsRegex bool   `json:"isRegex"`
		IsEqual bool   `json:"isEqual"`
	} `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
}

// Silences lists every silence, expired ones included.
func (s *Server) Silences(t testing.TB) []Silence {
	t.Helper()
	var out []Silence
	s.get(t, "/api/v2/silences", &out)
	return out
}

// Alert is an alert as the API lists it.
type Alert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State      string   `json:"state"` // active, suppressed, unprocessed
		SilencedBy []string `json:"silencedBy"`
	} `json:"status"`
}

// PostAlert fires an alert with the labels, as Prometheus would.
func (s *Server) PostAlert(t testing.TB, labels map[string]string) {
	t.Helper()
	b, _ := json.Marshal([]map[string]any{{"labels": labels}})
	resp, err := http.Post(s.URL+"/api/v2/alerts", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("amtest: posting an alert: HTTP %d: %s", resp.StatusCode, body)
	}
}

// Alerts lists the alerts.
func (s *Server) Alerts(t testing.TB) []Alert {
	t.Helper()
	var out []Alert
	s.get(t, "/api/v2/alerts", &out)
	return out
}

func (s *Server) get(t testing.TB, path string, v any) {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("amtest: GET %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("amtest: GET %s: %v", path, err)
	}
}
