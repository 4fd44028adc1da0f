package alloydbtest

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/alloydb/apiv1alpha/alloydbpb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake"
)

// messages are the AlloyDB Admin API's error texts, as far as the fake
// plays them.
var messages = gcpfake.APIMessages{
	Forbidden:      "Permission denied on the resource (or it may not exist).",
	NotFound:       "Resource was not found.",
	NotFoundReason: "notFound",
}

// adminPrefix is the path prefix of the Admin API version the connector's
// client (cloud.google.com/go/alloydb/apiv1alpha, REST) calls.
const adminPrefix = "/v1alpha/"

// serveAdmin answers the two Admin API calls the dialer makes, in the
// REST form of the v1alpha API:
//
//	GET  /v1alpha/projects/{p}/locations/{r}/clusters/{c}/instances/{i}/connectionInfo
//	POST /v1alpha/projects/{p}/locations/{r}/clusters/{c}:generateClientCertificate
//
// Bodies are the JSON mapping of the API's protocol buffers
// (alloydbpb.ConnectionInfo, GenerateClientCertificateRequest and
// Response), as the generated client reads and writes them.
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, adminPrefix)
	var e Endpoint
	var parent string
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(rest, "/connectionInfo"):
		e, parent = ConnectionInfo, strings.TrimSuffix(rest, "/connectionInfo")
	case r.Method == http.MethodPost && strings.HasSuffix(rest, ":generateClientCertificate"):
		e, parent = GenerateClientCertificate, strings.TrimSuffix(rest, ":generateClientCertificate")
	}
	project, region, cluster, instance, ok := parseParent(parent, e == ConnectionInfo)
	if e == 0 || !ok {
		messages.WriteError(w, http.StatusBadRequest, "unexpected Admin API call "+r.Method+" "+r.URL.Path, "badRequest")
		return
	}
	status, ok := s.api.Inject(w, r, int(e))
	if !ok {
		return
	}
	if status != 0 {
		messages.WriteError(w, status, "", "")
		return
	}
	if !s.api.Tokens.ValidBearer(r) {
		messages.WriteError(w, http.StatusUnauthorized, "Request had invalid authentication credentials.", "authError")
		return
	}
	if project != s.cfg.Project || region != s.cfg.Region || cluster != s.cfg.Cluster {
		messages.WriteError(w, http.StatusNotFound, "", "")
		return
	}
	if e == ConnectionInfo {
		in := s.byName[instance]
		if in == nil {
			messages.WriteError(w, http.StatusNotFound, "", "")
			return
		}
		writeProto(w, &alloydbpb.ConnectionInfo{
			Name:            parent + "/connectionInfo",
			IpAddress:       in.ip,
			PublicIpAddress: in.ip,
			InstanceUid:     in.uid,
		})
		return
	}
	s.serveClientCertificate(w, r)
}

// parseParent splits "projects/P/locations/R/clusters/C" (and
// "/instances/I" when instance is true).
func parseParent(parent string, instance bool) (project, region, cluster, inst string, ok bool) {
	parts := strings.Split(parent, "/")
	want := 6
	if instance {
		want = 8
	}
	if len(parts) != want || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "clusters" {
		return "", "", "", "", false
	}
	if instance {
		if parts[6] != "instances" {
			return "", "", "", "", false
		}
		inst = parts[7]
	}
	for _, p := range parts {
		if p == "" {
			return "", "", "", "", false
		}
	}
	return parts[1], parts[3], parts[5], inst, true
}

// serveClientCertificate signs a client certificate for the request's
// public key (a PEM block "RSA PUBLIC KEY" holding a PKCS #1 key) for
// cert_duration (at most an hour), and returns it with the client CA as
// pem_certificate_chain and the cluster's CA as ca_cert.
func (s *Server) serveClientCertificate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		messages.WriteError(w, http.StatusBadRequest, "Invalid JSON payload received.", "badRequest")
		return
	}
	var req alloydbpb.GenerateClientCertificateRequest
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &req); err != nil {
		messages.WriteError(w, http.StatusBadRequest, "Invalid JSON payload received.", "badRequest")
		return
	}
	pub, err := parsePublicKey(req.GetPublicKey())
	if err != nil {
		messages.WriteError(w, http.StatusBadRequest, "Invalid public key: "+err.Error(), "badRequest")
		return
	}
	life := time.Hour
	if d := req.GetCertDuration().AsDuration(); d > 0 && d < life {
		life = d
	}
	cn := clientCN
	if req.GetUseMetadataExchange() {
		cn = mdxCN
	}
	cert, err := s.clientCA.SignClient(pub, cn, life)
	if err != nil {
		messages.WriteError(w, http.StatusInternalServerError, "", "")
		return
	}
	writeProto(w, &alloydbpb.GenerateClientCertificateResponse{
		PemCertificateChain: []string{string(cert), string(s.clientCA.CertPEM())},
		CaCert:              string(s.serverCA.CertPEM()),
	})
}

func parsePublicKey(p string) (any, error) {
	b, _ := pem.Decode([]byte(p))
	if b == nil {
		return nil, errors.New("public_key is not PEM")
	}
	pub, err := x509.ParsePKCS1PublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("public_key: %w", err)
	}
	return pub, nil
}

// writeProto answers 200 with m in the JSON mapping of protocol buffers.
func writeProto(w http.ResponseWriter, m proto.Message) {
	b, err := protojson.Marshal(m)
	if err != nil {
		messages.WriteError(w, http.StatusInternalServerError, "", "")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
