package cloudsqltest

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// zone is the fake DNS of a Server with a DR replica: the write endpoint,
// a CNAME to the DNS name of the primary instance (the pattern the
// connector resolves with resolveConnectSettings), and each instance's
// DNS name with its A record. It moves at Switchover.
type zone struct {
	endpoint string            // the write endpoint, lower case, no final dot
	ips      map[string]string // instance DNS name → IP

	mu     sync.Mutex
	target string // the instance DNS name the endpoint names now
}

func (z *zone) point(target string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.target = target
}

// answer returns the resource records for a question about name, and
// whether the zone knows the name at all.
func (z *zone) answer(name string, t dnsmessage.Type) (cname, ip string, known bool) {
	z.mu.Lock()
	target := z.target
	z.mu.Unlock()
	switch {
	case name == z.endpoint:
		ip = z.ips[target]
		if t != dnsmessage.TypeA {
			ip = ""
		}
		return target, ip, true
	case z.ips[name] != "":
		if t == dnsmessage.TypeA {
			return "", z.ips[name], true
		}
		return "", "", true
	}
	return "", "", false
}

// dnsHook holds the zones of the live Servers. The connector's DNS
// resolver (cloudsqlconn.WithDNSResolver) uses net.DefaultResolver and no
// option replaces it, so the first Server with a DR replica makes
// net.DefaultResolver use Go's own resolver (PreferGo) with a Dial that,
// while a zone is live, answers every query in the process from the
// zones (NXDOMAIN for other names; /etc/hosts is still read first), and
// dials the configured name servers as before otherwise.
var dnsHook struct {
	once  sync.Once
	mu    sync.Mutex
	zones map[*zone]struct{}
}

func addZone(z *zone) {
	dnsHook.once.Do(func() {
		dnsHook.zones = map[*zone]struct{}{}
		prev := net.DefaultResolver.Dial
		net.DefaultResolver.PreferGo = true
		net.DefaultResolver.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			dnsHook.mu.Lock()
			zs := make([]*zone, 0, len(dnsHook.zones))
			for z := range dnsHook.zones {
				zs = append(zs, z)
			}
			dnsHook.mu.Unlock()
			if len(zs) == 0 {
				if prev != nil {
					return prev(ctx, network, address)
				}
				var d net.Dialer
				return d.DialContext(ctx, network, address)
			}
			client, server := net.Pipe()
			go serveDNS(server, zs)
			return client, nil
		}
	})
	dnsHook.mu.Lock()
	defer dnsHook.mu.Unlock()
	dnsHook.zones[z] = struct{}{}
}

func removeZone(z *zone) {
	dnsHook.mu.Lock()
	defer dnsHook.mu.Unlock()
	delete(dnsHook.zones, z)
}

// serveDNS answers the queries of one resolver connection, framed as over
// TCP (a net.Pipe is not a PacketConn, so Go's resolver frames them so),
// until the resolver closes it.
func serveDNS(c net.Conn, zs []*zone) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp, err := dnsAnswer(q, zs)
		if err != nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

func dnsAnswer(query []byte, zs []*zone) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true, RCode: dnsmessage.RCodeNameError}
	var cname, ip string
	for _, z := range zs {
		if c, a, known := z.answer(name, q.Type); known {
			cname, ip, rh.RCode = c, a, dnsmessage.RCodeSuccess
			break
		}
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	owner := q.Name
	if cname != "" {
		target, err := dnsmessage.NewName(cname + ".")
		if err != nil {
			return nil, err
		}
		hdr := dnsmessage.ResourceHeader{Name: owner, Class: dnsmessage.ClassINET, TTL: 0}
		if err := b.CNAMEResource(hdr, dnsmessage.CNAMEResource{CNAME: target}); err != nil {
			return nil, err
		}
		owner = target
	}
	if ip != "" {
		var a [4]byte
		copy(a[:], net.ParseIP(ip).To4())
		hdr := dnsmessage.ResourceHeader{Name: owner, Class: dnsmessage.ClassINET, TTL: 0}
		if err := b.AResource(hdr, dnsmessage.AResource{A: a}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}
