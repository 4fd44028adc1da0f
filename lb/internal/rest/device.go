package rest

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/lb"
)

// DefaultRequestTimeout bounds each request of an adapter whose Config
// names no HTTP client.
const DefaultRequestTimeout = 30 * time.Second

// Check validates what every adapter's Config needs: the endpoint (see
// [lb.ValidateEndpoint]; http:// only with allowHTTP, as VENDOR.Endpoint),
// a username and a password, reported as VENDOR.Username and
// VENDOR.Password.
func Check(vendor, endpoint, username string, password lb.Secret, allowHTTP bool) error {
	if err := lb.ValidateEndpoint(endpoint); err != nil {
		return err
	}
	if u, _ := url.Parse(endpoint); u.Scheme == "http" && !allowHTTP {
		return &lb.ConfigError{Field: vendor + ".Endpoint", Why: "http:// sends the password and the session token unencrypted: use https, or set AllowInsecureHTTP to accept that"}
	}
	switch {
	case username == "":
		return &lb.ConfigError{Field: vendor + ".Username", Why: "must not be empty"}
	case password == "":
		return &lb.ConfigError{Field: vendor + ".Password", Why: "must not be empty"}
	}
	return nil
}

// Dialect is how a vendor's API answers.
type Dialect struct {
	// Vendor names the adapter in its errors ("f5", "a10").
	Vendor string
	// Header returns the headers that carry a session's credential.
	Header func(cred string) http.Header
	// OK reports whether an answer to a member call succeeded.
	OK func(status int) bool
	// Expired reports whether an error answer says that the session has
	// ended, so that logging in again may help.
	Expired func(*Response) bool
	// Read reads an error answer: the vendor's error code (0 if none),
	// its message, and what it means.
	Read func(*Response) (code int64, msg string, kind lb.Kind)
}

// Device is a vendor's API behind a session: the requests, the session's
// credential and the vendor's [Dialect]. It is safe for concurrent use;
// it must not be copied.
type Device struct {
	Client
	Dialect
	Session Session
	// Relogin logs in again and records the new credential in Session;
	// Call runs it, through [Session.Relogin], once when an answer says
	// that the session has ended.
	Relogin func(context.Context) error
}

// Init sets up d to speak dialect to endpoint with hc (nil: a client of
// its own with a DefaultRequestTimeout timeout), logging in again with
// relogin, and redacting the password and the session's credential from
// every message and error.
//
// Redirects are not followed (a copy of hc is used): an answer never
// chooses where the login body, with its password, or a session header
// goes; a 3xx is an error answer like any other.
func (d *Device) Init(dialect Dialect, hc *http.Client, endpoint string, password lb.Secret, relogin func(context.Context) error) {
	d.Dialect, d.Relogin = dialect, relogin
	own := *cmp.Or(hc, &http.Client{Timeout: DefaultRequestTimeout})
	own.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	d.Client = Client{HTTP: &own, Base: strings.TrimSuffix(endpoint, "/"), Secrets: func() []string {
		cred, _ := d.Session.Get()
		return []string{password.Reveal(), cred}
	}}
}

// Call sends a request with the session's credential. When the answer
// says that the session has ended it logs in again once (only the first
// of the calls that found the same session ended does) and sends the
// request again. An answer that is not OK is an [*lb.APIError].
func (d *Device) Call(ctx context.Context, op, member, method, path string, body any) (*Response, error) {
	cred, gen := d.Session.Get()
	if cred == "" {
		return nil, &lb.APIError{Vendor: d.Vendor, Op: op, Member: member, Kind: lb.KindSession, Message: "not logged in"}
	}
	resp, err := d.Do(ctx, method, path, d.Header(cred), body)
	if err != nil {
		return nil, d.TransportError(op, member, err)
	}
	if !d.OK(resp.Status) && d.Expired(resp) {
		if err := d.Session.Relogin(ctx, gen, d.Relogin); err != nil {
			return nil, err
		}
		cred, _ = d.Session.Get()
		resp, err = d.Do(ctx, method, path, d.Header(cred), body)
		if err != nil {
			return nil, d.TransportError(op, member, err)
		}
	}
	if !d.OK(resp.Status) {
		return nil, d.APIError(op, member, resp)
	}
	return resp, nil
}

// Send sends one request of the session's own (logging in or out, a
// token's lifetime) with the headers hdr, and returns the answer when it
// is 200 OK; otherwise the error: a transport error (Status 0) or the
// answer's.
func (d *Device) Send(ctx context.Context, op, method, path string, hdr http.Header, body any) (*Response, *lb.APIError) {
	resp, err := d.Do(ctx, method, path, hdr, body)
	if err != nil {
		return nil, d.TransportError(op, "", err)
	}
	if resp.Status != http.StatusOK {
		return nil, d.APIError(op, "", resp)
	}
	return resp, nil
}

// APIError classifies an error answer with the Dialect; its message is
// redacted, on one line and bounded.
func (d *Device) APIError(op, member string, resp *Response) *lb.APIError {
	code, msg, kind := d.Read(resp)
	return &lb.APIError{Vendor: d.Vendor, Op: op, Member: member, Kind: kind, Status: resp.Status, Code: code, Message: d.Message(msg)}
}

// TransportError is a request that got no answer: KindUnavailable.
func (d *Device) TransportError(op, member string, err error) *lb.APIError {
	return &lb.APIError{Vendor: d.Vendor, Op: op, Member: member, Kind: lb.KindUnavailable, Err: err}
}

// BadResponse is an answer that lacks what msg says: KindBadResponse.
func (d *Device) BadResponse(op, member string, resp *Response, msg string) *lb.APIError {
	return &lb.APIError{Vendor: d.Vendor, Op: op, Member: member, Kind: lb.KindBadResponse, Status: resp.Status, Message: msg}
}

// StatusKind is what an error status means when the vendor's answer says
// no more: 403 no privilege, 404 not found, 503 busy, other 5xx
// unavailable, other 4xx rejected, anything else a bad response.
func StatusKind(status int) lb.Kind {
	switch {
	case status == http.StatusForbidden:
		return lb.KindNoPrivilege
	case status == http.StatusNotFound:
		return lb.KindNotFound
	case status == http.StatusServiceUnavailable:
		return lb.KindBusy
	case status >= 500:
		return lb.KindUnavailable
	case status >= 400:
		return lb.KindRejected
	}
	return lb.KindBadResponse
}

// DeviceID names the device and partition an adapter drives, the same
// whatever the configuration calls it: "VENDOR HOST:PORT PARTITION", with
// the host in lower case and the scheme's default port made explicit
// ("f5 bigip.example.net:443 Common"). Member locks are keyed by it (see
// [lb.DeviceIdentifier]). Two names of one device (an address and a host
// name, or two host names) still give two IDs.
func DeviceID(vendor, endpoint, partition string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return vendor + " " + endpoint + " " + partition
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return vendor + " " + net.JoinHostPort(host, port) + " " + partition
}
