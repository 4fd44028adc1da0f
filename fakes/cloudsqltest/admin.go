package cloudsqltest

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake"
)

const (
	apiPrefix     = "/sql/v1beta4/"
	adminPrefix   = apiPrefix + "projects/"
	resolvePrefix = apiPrefix + "locations/"
)

// messages are the Cloud SQL Admin API's error texts.
var messages = gcpfake.APIMessages{
	Forbidden:      "The client is not authorized to make this request.",
	NotFound:       "The Cloud SQL instance does not exist.",
	NotFoundReason: "instanceDoesNotExist",
}

func apiError(w http.ResponseWriter, code int, msg, reason string) {
	messages.WriteError(w, code, msg, reason)
}

func writeJSON(w http.ResponseWriter, code int, v any) { gcpfake.WriteJSON(w, code, v) }

// inject counts a request to e, applies its injected delay and reports the
// injected failure status, or 0. It returns ok=false when the client went
// away or the fake closed during the delay.
func (s *Server) inject(w http.ResponseWriter, r *http.Request, e Endpoint) (status int, ok bool) {
	return s.api.Inject(w, r, int(e))
}

// serveAdmin answers the two Admin API calls the dialer makes:
//
//	GET  /sql/v1beta4/projects/{project}/instances/{instance}/connectSettings
//	POST /sql/v1beta4/projects/{project}/instances/{instance}:generateEphemeralCert
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, resolvePrefix) {
		s.serveResolve(w, r)
		return
	}
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
	if !s.api.Tokens.ValidBearer(r) {
		apiError(w, http.StatusUnauthorized, "Request had invalid authentication credentials.", "authError")
		return
	}
	region, ip, known := s.instanceInfo(project, inst)
	if !known {
		apiError(w, http.StatusNotFound, "", "")
		return
	}
	if e == ConnectSettings {
		s.serveConnectSettings(w, region, ip, "")
		return
	}
	s.serveEphemeralCert(w, r)
}

// instanceInfo returns the region and IP address of the instance named
// inst in project, or known=false.
func (s *Server) instanceInfo(project, inst string) (region, ip string, known bool) {
	switch {
	case project != s.cfg.Project:
		return "", "", false
	case inst == s.cfg.Instance:
		return s.cfg.Region, InstanceIP, true
	case inst == s.cfg.DRInstance && s.dr != nil:
		return s.cfg.DRRegion, DRInstanceIP, true
	}
	return "", "", false
}

// serveResolve answers the call the connector's DNS resolver makes for a
// name of the instances' DNS pattern (instance.project.region.sql-psa.goog):
//
//	GET /sql/v1beta4/locations/{region}/dns/{dnsName}:resolveConnectSettings
//
// with the instance's connectSettings, connectionName included.
func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, resolvePrefix)
	region, rest, ok := strings.Cut(rest, "/dns/")
	name, ok2 := strings.CutSuffix(rest, ":resolveConnectSettings")
	if !ok || !ok2 || r.Method != http.MethodGet || strings.Contains(region, "/") || strings.Contains(name, "/") {
		apiError(w, http.StatusBadRequest, "unexpected Admin API call "+r.Method+" "+r.URL.Path, "badRequest")
		return
	}
	status, served := s.inject(w, r, ResolveConnectSettings)
	if !served {
		return
	}
	if status != 0 {
		apiError(w, status, "", "")
		return
	}
	if !s.api.Tokens.ValidBearer(r) {
		apiError(w, http.StatusUnauthorized, "Request had invalid authentication credentials.", "authError")
		return
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, in := range []string{s.cfg.Instance, s.cfg.DRInstance} {
		reg, ip, known := s.instanceInfo(s.cfg.Project, in)
		if known && reg == region && name == instanceDNSName(s.cfg.Project, reg, in) {
			s.serveConnectSettings(w, reg, ip, s.cfg.Project+":"+reg+":"+in)
			return
		}
	}
	apiError(w, http.StatusNotFound, "", "")
}

// instanceDNSName is the DNS name of an instance, in the pattern the
// connector resolves with resolveConnectSettings.
func instanceDNSName(project, region, inst string) string {
	return strings.ToLower(inst + "." + project + "." + region + ".sql-psa.goog")
}

func (s *Server) serveConnectSettings(w http.ResponseWriter, region, instIP, connName string) {
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
		ConnectionName  string   `json:"connectionName,omitempty"`
		Region          string   `json:"region"`
		BackendType     string   `json:"backendType"`
		DatabaseVersion string   `json:"databaseVersion"`
		IPAddresses     []ip     `json:"ipAddresses"`
		ServerCACert    *sslCert `json:"serverCaCert"`
	}{
		Kind:            "sql#connectSettings",
		ConnectionName:  connName,
		Region:          region,
		BackendType:     "SECOND_GEN",
		DatabaseVersion: s.cfg.DatabaseVersion,
		IPAddresses:     []ip{{Type: "PRIMARY", IPAddress: instIP}},
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
	if req.AccessToken != "" && !s.api.Tokens.Valid(true, req.AccessToken) {
		apiError(w, http.StatusUnauthorized, "Invalid IAM login token.", "authError")
		return
	}
	cert, err := s.ephemeralCert(req.PublicKey)
	if err != nil {
		apiError(w, http.StatusBadRequest, "Invalid public key: "+err.Error(), "badRequest")
		return
	}
	if req.AccessToken != "" {
		s.mu.Lock()
		s.loginCerts++
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

// ephemeralCert signs a client certificate for the public key in pubPEM, as
// generateEphemeralCert does: the connector sends a PEM block of type
// "RSA PUBLIC KEY" that holds a PKIX-encoded key. The certificate is valid
// for one hour.
func (s *Server) ephemeralCert(pubPEM string) (string, error) {
	b, _ := pem.Decode([]byte(pubPEM))
	if b == nil {
		return "", errors.New("public_key is not PEM")
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return "", fmt.Errorf("public_key: %w", err)
	}
	cert, err := s.clientCA.SignClient(pub, "holdfast-fake-ephemeral", time.Hour)
	return string(cert), err
}
