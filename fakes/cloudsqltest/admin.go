package cloudsqltest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

const adminPrefix = "/sql/v1beta4/projects/"

func (s *Server) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every handler is joined by Close.
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			http.Error(w, "closed", http.StatusServiceUnavailable)
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		defer s.wg.Done()

		switch {
		case r.URL.Path == "/token":
			s.serveToken(w, r)
		case strings.HasPrefix(r.URL.Path, adminPrefix):
			s.serveAdmin(w, r)
		default:
			apiError(w, http.StatusNotFound, "Not found: "+r.URL.Path, "notFound")
		}
	})
}

// inject counts a request to e, applies its injected delay and reports the
// injected failure status, or 0. It returns ok=false when the client went
// away or the fake closed during the delay.
func (s *Server) inject(w http.ResponseWriter, r *http.Request, e Endpoint) (status int, ok bool) {
	s.mu.Lock()
	s.stats.count(e)
	f := &s.http4[e]
	var delay time.Duration
	if f.slowN.take() {
		delay = f.delay
	}
	if f.failN.take() {
		status = f.status
	}
	s.mu.Unlock()
	if !s.wait(r.Context(), delay) {
		http.Error(w, "fake closed or request canceled during an injected delay", http.StatusServiceUnavailable)
		return 0, false
	}
	if status != 0 {
		s.mu.Lock()
		s.stats.Failed++
		s.mu.Unlock()
	}
	return status, true
}

// serveAdmin answers the two Admin API calls the dialer makes:
//
//	GET  /sql/v1beta4/projects/{project}/instances/{instance}/connectSettings
//	POST /sql/v1beta4/projects/{project}/instances/{instance}:generateEphemeralCert
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, adminPrefix)
	project, rest, ok1 := strings.Cut(rest, "/instances/")
	var e Endpoint
	var inst string
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(rest, "/connectSettings"):
		e, inst = ConnectSettings, strings.TrimSuffix(rest, "/connectSettings")
	case r.Method == http.MethodPost && strings.HasSuffix(rest, ":generateEphemeralCert"):
		e, inst = GenerateEphemeralCert, strings.TrimSuffix(rest, ":generateEphemeralCert")
	}
	if !ok1 || e == 0 || strings.Contains(inst, "/") {
		apiError(w, http.StatusBadRequest, "unexpected Admin API call "+r.Method+" "+r.URL.Path, "badRequest")
		return
	}
	status, ok := s.inject(w, r, e)
	if !ok {
		return
	}
	if status != 0 {
		apiError(w, status, "", "")
		return
	}
	if tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !found || !s.validToken(APIToken, tok) {
		apiError(w, http.StatusUnauthorized, "Request had invalid authentication credentials.", "authError")
		return
	}
	if project != s.cfg.Project || inst != s.cfg.Instance {
		apiError(w, http.StatusNotFound, "", "")
		return
	}
	if e == ConnectSettings {
		s.serveConnectSettings(w)
		return
	}
	s.serveEphemeralCert(w, r)
}

func (s *Server) serveConnectSettings(w http.ResponseWriter) {
	type ip struct {
		Type      string `json:"type"`
		IPAddress string `json:"ipAddress"`
	}
	type sslCert struct {
		Kind string `json:"kind"`
		Cert string `json:"cert"`
	}
	writeJSON(w, http.StatusOK, struct {
		Kind            string   `json:"kind"`
		Region          string   `json:"region"`
		BackendType     string   `json:"backendType"`
		DatabaseVersion string   `json:"databaseVersion"`
		IPAddresses     []ip     `json:"ipAddresses"`
		ServerCACert    *sslCert `json:"serverCaCert"`
	}{
		Kind:            "sql#connectSettings",
		Region:          s.cfg.Region,
		BackendType:     "SECOND_GEN",
		DatabaseVersion: s.cfg.DatabaseVersion,
		IPAddresses:     []ip{{Type: "PRIMARY", IPAddress: InstanceIP}},
		ServerCACert:    &sslCert{Kind: "sql#sslCert", Cert: s.serverPEM},
	})
}

func (s *Server) serveEphemeralCert(w http.ResponseWriter, r *http.Request) {
	var req struct {
		PublicKey   string `json:"public_key"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "Invalid JSON payload received.", "badRequest")
		return
	}
	if req.AccessToken != "" && !s.validToken(LoginToken, req.AccessToken) {
		apiError(w, http.StatusUnauthorized, "Invalid IAM login token.", "authError")
		return
	}
	cert, err := s.clientCA.ephemeralCert(req.PublicKey)
	if err != nil {
		apiError(w, http.StatusBadRequest, "Invalid public key: "+err.Error(), "badRequest")
		return
	}
	if req.AccessToken != "" {
		s.mu.Lock()
		s.stats.LoginCerts++
		s.mu.Unlock()
	}
	type sslCert struct {
		Kind string `json:"kind"`
		Cert string `json:"cert"`
	}
	writeJSON(w, http.StatusOK, struct {
		EphemeralCert sslCert `json:"ephemeralCert"`
	}{sslCert{Kind: "sql#sslCert", Cert: cert}})
}

// serveToken is an OAuth2 token endpoint (client credentials grant). The
// scope says which kind of token is asked for.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest)
		return
	}
	kind := APIToken
	if strings.Contains(r.PostForm.Get("scope"), ScopeLogin) {
		kind = LoginToken
	}
	status, ok := s.inject(w, r, kind)
	if !ok {
		return
	}
	if status != 0 {
		tokenError(w, status)
		return
	}
	if r.PostForm.Get("grant_type") != "client_credentials" {
		tokenError(w, http.StatusBadRequest)
		return
	}
	tok, exp := s.newToken(kind)
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok,
		"token_type":   "Bearer",
		"expires_in":   int(time.Until(exp).Seconds()),
	})
}

// tokenError answers as an OAuth2 token endpoint does: a JSON error for 400
// and 401, plain text otherwise.
func tokenError(w http.ResponseWriter, code int) {
	switch code {
	case http.StatusBadRequest:
		writeJSON(w, code, map[string]string{"error": "invalid_grant", "error_description": "Invalid grant: account not found"})
	case http.StatusUnauthorized:
		writeJSON(w, code, map[string]string{"error": "invalid_client", "error_description": "The OAuth client was not found."})
	default:
		http.Error(w, http.StatusText(code), code)
	}
}

// apiError answers a Google API error. An empty message or reason gets the
// one the Admin API uses for the status.
func apiError(w http.ResponseWriter, code int, msg, reason string) {
	dmsg, dreason, status := http.StatusText(code), "", ""
	switch {
	case code == http.StatusForbidden:
		dmsg, dreason, status = "The client is not authorized to make this request.", "notAuthorized", "PERMISSION_DENIED"
	case code == http.StatusNotFound:
		dmsg, dreason, status = "The Cloud SQL instance does not exist.", "instanceDoesNotExist", "NOT_FOUND"
	case code == http.StatusTooManyRequests:
		dreason, status = "rateLimitExceeded", "RESOURCE_EXHAUSTED"
	case code == http.StatusUnauthorized:
		status = "UNAUTHENTICATED"
	case code == http.StatusServiceUnavailable:
		dmsg, dreason, status = "The service is currently unavailable.", "backendError", "UNAVAILABLE"
	case code >= 500:
		dreason, status = "backendError", "INTERNAL"
	}
	if msg == "" {
		msg = dmsg
	}
	if reason == "" {
		reason = dreason
	}
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason,omitempty"`
	}
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Errors  []item `json:"errors"`
		Status  string `json:"status,omitempty"`
	}
	writeJSON(w, code, map[string]body{"error": {
		Code: code, Message: msg, Status: status,
		Errors: []item{{Message: msg, Domain: "global", Reason: reason}},
	}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
