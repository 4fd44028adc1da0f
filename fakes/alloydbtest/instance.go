package alloydbtest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"cloud.google.com/go/alloydb/connectors/apiv1alpha/connectorspb"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake"
)

// maxMessageSize bounds a metadata exchange message, as the connector's
// buffer does.
const maxMessageSize = 16 * 1024

// DefaultRejection is the message of a metadata exchange that
// [Instance.RejectMetadataExchange] refuses without a message of its own.
// It is the fake's text, not the service's.
const DefaultRejection = "fake AlloyDB: the IAM principal is not allowed to connect (alloydb.instances.connect denied)"

// Instance is one instance of the fake cluster, the primary or a read
// pool: its URI, its IP address, and its server-side proxy, with faults to
// inject. Get one with [Server.Primary] or [Server.ReadPool]. It is safe
// for concurrent use.
//
// The proxy does what AlloyDB's does (the other side of alloydbconn's
// Dialer.Dial): a TLS 1.3 handshake in which it requires a client
// certificate signed by the cluster's client CA (from
// generateClientCertificate); then, unless the certificate was issued with
// use_metadata_exchange false, the metadata exchange: it reads a big-endian
// uint32 length and a MetadataExchangeRequest (user agent, auth type
// DB_NATIVE or AUTO_IAM, OAuth2 token), checks that the token is one the
// fake minted and is not expired, and answers a length and a
// MetadataExchangeResponse, OK or ERROR with a message; then it forwards
// the PostgreSQL protocol to the instance's backend.
type Instance struct {
	srv   *Server
	name  string
	uri   string
	ip    string
	uid   string
	proxy *gcpfake.Instance

	mu        sync.Mutex
	rejectN   gcpfake.Budget
	rejectMsg string
	exchanges int
	iamLogins int
	rejected  int
}

// mdxCN is the common name of the client certificates issued for a
// connector that does the metadata exchange; others get clientCN.
const (
	mdxCN    = "holdfast-fake-alloydb-client+mdx"
	clientCN = "holdfast-fake-alloydb-client"
)

func (s *Server) newInstance(name, ip, backend string, signer *certs.Authority) (*Instance, error) {
	in := &Instance{
		srv:  s,
		name: name,
		uri:  "projects/" + s.cfg.Project + "/locations/" + s.cfg.Region + "/clusters/" + s.cfg.Cluster + "/instances/" + name,
		ip:   ip,
		uid:  fmt.Sprintf("00000000-0000-0000-0000-%012d", len(s.instances)+1),
	}
	cert, err := signer.KeyPairIP(in.uid+".server.alloydb", nil, []net.IP{net.ParseIP(ip)})
	if err != nil {
		return nil, err
	}
	clients := x509.NewCertPool()
	clients.AddCert(s.clientCA.Cert())
	in.proxy, err = gcpfake.StartInstance(s.life, gcpfake.InstanceConfig{
		TLS: &tls.Config{
			Certificates: []tls.Certificate{*cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clients,
			MinVersion:   tls.VersionTLS13,
		},
		Backend: backend, IP: ip, Port: Port,
		AfterHandshake: in.metadataExchange,
		ErrClosed:      ErrClosed, ErrNotInstance: ErrNotInstance,
	})
	if err != nil {
		return nil, err
	}
	return in, nil
}

// Name returns the instance's name, the last part of its URI.
func (in *Instance) Name() string { return in.name }

// URI returns the instance's URI,
// "projects/P/locations/R/clusters/C/instances/NAME".
func (in *Instance) URI() string { return in.uri }

// IP returns the IP address connectionInfo reports for the instance.
func (in *Instance) IP() string { return in.ip }

// Addr returns the "host:port" of the instance's TLS listener.
func (in *Instance) Addr() string { return in.proxy.Addr() }

// Refuse makes the next n dials of the instance through [Server.Dial] fail
// like a TCP connect to a closed port (n < 0: every dial until
// [Instance.Clear]). The refusal is real: the dial goes to a loopback port
// that is bound but not listening, and fails with ECONNREFUSED. It is how a
// primary looks from the client while AlloyDB fails over to its standby.
func (in *Instance) Refuse(n int) { in.proxy.Refuse(n) }

// ResetHandshake makes the instance reset the next n connections in the
// middle of the TLS handshake (n < 0: all until [Instance.Clear]): the
// dialer's handshake fails with ECONNRESET.
func (in *Instance) ResetHandshake(n int) { in.proxy.ResetHandshake(n) }

// ResetAfterHandshake makes the instance complete the TLS handshake of the
// next n connections and then reset them (n < 0: all until
// [Instance.Clear]): the dialer's metadata exchange fails with ECONNRESET.
func (in *Instance) ResetAfterHandshake(n int) { in.proxy.ResetAfterHandshake(n) }

// SlowHandshake makes the instance wait d before it starts the TLS
// handshake of the next n connections (n < 0: all until [Instance.Clear]).
func (in *Instance) SlowHandshake(d time.Duration, n int) { in.proxy.SlowHandshake(d, n) }

// RejectMetadataExchange makes the instance answer the next n metadata
// exchanges with ERROR and msg (n < 0: all until [Instance.Clear]; an
// empty msg is [DefaultRejection]), as AlloyDB does for a principal that
// may not connect or log in. The connector returns msg as an error of no
// particular type.
func (in *Instance) RejectMetadataExchange(n int, msg string) {
	if msg == "" {
		msg = DefaultRejection
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rejectN, in.rejectMsg = gcpfake.Budget(n), msg
}

// Clear removes every fault injected into the instance.
func (in *Instance) Clear() {
	in.proxy.Clear()
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rejectN = 0
}

// Stats returns a snapshot of the instance's counters.
func (in *Instance) Stats() InstanceStats {
	p := in.proxy.Stats()
	in.mu.Lock()
	defer in.mu.Unlock()
	return InstanceStats{
		Dials: p.Dials, Refused: p.Refused, Resets: p.Resets, Handshakes: p.Handshakes,
		Exchanges: in.exchanges, IAMLogins: in.iamLogins, Rejected: in.rejected,
		Forwarded: p.Forwarded,
	}
}

// metadataExchange is the server's part of the connector's metadata
// exchange, on a connection whose TLS handshake is complete. It reports
// whether the connection may go on to PostgreSQL.
func (in *Instance) metadataExchange(tc *tls.Conn) bool {
	if peer := tc.ConnectionState().PeerCertificates; len(peer) == 0 || peer[0].Subject.CommonName != mdxCN {
		return true // a certificate issued for a connector that opted out
	}
	_ = tc.SetDeadline(time.Now().Add(gcpfake.HandshakeTimeout))
	defer tc.SetDeadline(time.Time{})
	var size [4]byte
	if _, err := io.ReadFull(tc, size[:]); err != nil {
		return false
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxMessageSize {
		return false
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(tc, buf); err != nil {
		return false
	}
	var req connectorspb.MetadataExchangeRequest
	if err := proto.Unmarshal(buf, &req); err != nil {
		return false
	}
	iam := req.GetAuthType() == connectorspb.MetadataExchangeRequest_AUTO_IAM
	tok := req.GetOauth2Token()
	resp := &connectorspb.MetadataExchangeResponse{ResponseCode: connectorspb.MetadataExchangeResponse_OK}

	in.mu.Lock()
	in.exchanges++
	switch {
	case in.rejectN.Take():
		resp.ResponseCode, resp.Error = connectorspb.MetadataExchangeResponse_ERROR, in.rejectMsg
	case !in.srv.api.Tokens.Valid(false, tok) && !in.srv.api.Tokens.Valid(true, tok):
		resp.ResponseCode, resp.Error = connectorspb.MetadataExchangeResponse_ERROR, "fake AlloyDB: the OAuth2 token is not valid"
	case iam:
		in.iamLogins++
	}
	if resp.ResponseCode != connectorspb.MetadataExchangeResponse_OK {
		in.rejected++
	}
	in.mu.Unlock()

	m, err := proto.Marshal(resp)
	if err != nil {
		return false
	}
	// One write, one TLS record: the connector reads the length and the
	// message with one Read each.
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(m)), uint32(len(m)))
	if _, err := tc.Write(append(out, m...)); err != nil {
		return false
	}
	return resp.ResponseCode == connectorspb.MetadataExchangeResponse_OK
}
