package gcpfake

import (
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// APIConfig configures [StartAPI].
type APIConfig struct {
	// Endpoints is the number of the fake's HTTP endpoints (numbered from
	// 1) whose faults [HTTPFaults] holds; APIToken and LoginToken are the
	// numbers of the token endpoint's two kinds.
	Endpoints, APIToken, LoginToken int
	// LoginScope is the scope that asks the token endpoint for a login
	// token.
	LoginScope string
	// Prefix is the path prefix of the Admin API, which Admin serves.
	Prefix string
	Admin  http.HandlerFunc
	// Messages answer the paths that are neither.
	Messages APIMessages
}

// API is a fake's HTTP side: its Admin API and an OAuth2 token endpoint
// ("/token") over plain HTTP on one loopback listener, their faults, the
// tokens it mints, and the HTTP client its token sources fetch with.
type API struct {
	Faults *HTTPFaults
	Tokens *Tokens
	// URL is "http://127.0.0.1:PORT".
	URL string

	cfg    APIConfig
	life   *Life
	ln     net.Listener
	srv    *http.Server
	client *http.Client // idle connections closed by Close
}

// StartAPI opens the listener and serves it, in a goroutine that l waits
// for; every handler is counted by l too. Close it with [API.Close] after
// l.Shut.
func StartAPI(l *Life, cfg APIConfig) (*API, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &API{
		Faults: NewHTTPFaults(cfg.Endpoints),
		Tokens: NewTokens(cfg.LoginScope),
		URL:    "http://" + ln.Addr().String(),
		cfg:    cfg,
		life:   l,
		ln:     ln,
		client: &http.Client{Transport: &http.Transport{
			DialContext:       (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			ForceAttemptHTTP2: false,
			MaxIdleConns:      4,
		}},
	}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve), ReadHeaderTimeout: 10 * time.Second}
	l.Go(func() {
		_ = a.srv.Serve(ln) // returns when Close closes the server
	})
	return a, nil
}

func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	// Every handler is joined by Close.
	if !a.life.Enter() {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	defer a.life.Leave()
	switch {
	case r.URL.Path == "/token":
		a.Tokens.Serve(w, r, func(login bool) (int, bool) {
			e := a.cfg.APIToken
			if login {
				e = a.cfg.LoginToken
			}
			return a.Inject(w, r, e)
		})
	case strings.HasPrefix(r.URL.Path, a.cfg.Prefix):
		a.cfg.Admin(w, r)
	default:
		a.cfg.Messages.WriteError(w, http.StatusNotFound, "Not found: "+r.URL.Path, "notFound")
	}
}

// Inject counts a request to endpoint e and applies its faults
// ([HTTPFaults.Inject]).
func (a *API) Inject(w http.ResponseWriter, r *http.Request, e int) (status int, ok bool) {
	return a.Faults.Inject(a.life, w, r, e)
}

// TokenURL is the token endpoint's URL.
func (a *API) TokenURL() string { return a.URL + "/token" }

// TokenSource returns a token source that fetches tokens of scope from the
// token endpoint ([TokenSource]).
func (a *API) TokenSource(scope string) oauth2.TokenSource {
	return TokenSource(a.client, a.TokenURL(), scope)
}

// Transport is the HTTP transport of the token sources, for a client that
// reaches the fake.
func (a *API) Transport() http.RoundTripper { return a.client.Transport }

// Close closes the server, its listener and its connections.
func (a *API) Close() { _ = a.srv.Close() }

// CloseIdle closes the idle connections of the token sources' client:
// after [Life.Wait].
func (a *API) CloseIdle() { a.client.CloseIdleConnections() }
