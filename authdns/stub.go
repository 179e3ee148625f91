package authdns

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/envelopd/envelopd/internal/defaults"
)

// Defaults of a Client.
const (
	DefaultTimeout    = 5 * time.Second
	DefaultMaxEntries = 10000
	DefaultMaxRecords = 100
	// DefaultMaxTTL caps how long any answer is kept, whatever its TTL.
	DefaultMaxTTL = time.Hour
	// negativeTTL is how long a "not found" is kept when the answer
	// carries no SOA (RFC 2308 §5 wants the SOA minimum).
	negativeTTL = 5 * time.Minute
	maxCNAME    = 8
	udpSize     = 1232 // EDNS0 payload size (the DNS flag day 2020 value)
)

// Config configures a Client.
type Config struct {
	// Server is the recursive resolver's address (host:port, or host for
	// port 53). Empty: the first nameserver of /etc/resolv.conf, else
	// 127.0.0.1:53.
	Server string
	// Timeout bounds one lookup, retries included (0: DefaultTimeout).
	Timeout time.Duration
	// MaxEntries bounds the cache (0: DefaultMaxEntries; < 0: no cache).
	MaxEntries int
	// MaxRecords bounds the records of one answer that are kept (0:
	// DefaultMaxRecords); the rest are dropped.
	MaxRecords int
	// MaxTTL caps the TTL honoured (0: DefaultMaxTTL).
	MaxTTL time.Duration
}

// Client is a caching stub resolver (see the package doc). It is safe for
// concurrent use.
type Client struct {
	server     string
	timeout    time.Duration
	maxEntries int
	maxRecords int
	maxTTL     time.Duration
	now        func() time.Time

	mu    sync.Mutex
	cache map[cacheKey]entry

	statsMu       sync.Mutex
	queries, hits int64
}

type cacheKey struct {
	name string
	typ  dnsmessage.Type
}

type entry struct {
	rrs     []dnsmessage.Resource // answers of the asked type; nil: not found
	expires time.Time
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	c := &Client{server: cfg.Server, timeout: cfg.Timeout, maxEntries: cfg.MaxEntries,
		maxRecords: cfg.MaxRecords, maxTTL: cfg.MaxTTL, now: time.Now, cache: map[cacheKey]entry{}}
	defaults.Positive(&c.timeout, DefaultTimeout)
	if c.maxEntries == 0 {
		c.maxEntries = DefaultMaxEntries
	}
	defaults.Positive(&c.maxRecords, DefaultMaxRecords)
	defaults.Positive(&c.maxTTL, DefaultMaxTTL)
	if c.server == "" {
		c.server = systemServer("/etc/resolv.conf")
	}
	if _, _, err := net.SplitHostPort(c.server); err != nil {
		c.server = net.JoinHostPort(strings.Trim(c.server, "[]"), "53")
	}
	if _, port, err := net.SplitHostPort(c.server); err != nil {
		return nil, fmt.Errorf("authdns: bad server address %q: %w", cfg.Server, err)
	} else if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return nil, fmt.Errorf("authdns: bad server address %q: port %q", cfg.Server, port)
	}
	return c, nil
}

// Server is the address the Client asks.
func (c *Client) Server() string { return c.server }

// Stats returns how many lookups were made and how many the cache
// answered.
func (c *Client) Stats() (lookups, cacheHits int64) {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	return c.queries, c.hits
}

// systemServer returns the first nameserver of a resolv.conf file.
func systemServer(path string) string {
	f, err := os.Open(path)
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 2 && fs[0] == "nameserver" {
				return net.JoinHostPort(fs[1], "53")
			}
		}
	}
	return "127.0.0.1:53"
}

// LookupTXT returns the TXT records of name, each record's strings
// concatenated (RFC 7208 §3.3).
func (c *Client) LookupTXT(ctx context.Context, name string) ([]string, error) {
	rrs, err := c.lookup(ctx, name, dnsmessage.TypeTXT)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, strings.Join(rr.Body.(*dnsmessage.TXTResource).TXT, ""))
	}
	return out, nil
}

// LookupMX returns the MX records of name, in the order received.
func (c *Client) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	rrs, err := c.lookup(ctx, name, dnsmessage.TypeMX)
	if err != nil {
		return nil, err
	}
	out := make([]*net.MX, 0, len(rrs))
	for _, rr := range rrs {
		mx := rr.Body.(*dnsmessage.MXResource)
		out = append(out, &net.MX{Host: mx.MX.String(), Pref: mx.Pref})
	}
	return out, nil
}

// LookupIPAddr returns the A and AAAA records of host (A first). It is
// not found only when neither type has records.
func (c *Client) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	if ip := net.ParseIP(host); ip != nil {
		return []net.IPAddr{{IP: ip}}, nil
	}
	var out []net.IPAddr
	a, errA := c.lookup(ctx, host, dnsmessage.TypeA)
	for _, rr := range a {
		ip := rr.Body.(*dnsmessage.AResource).A
		out = append(out, net.IPAddr{IP: net.IP(ip[:])})
	}
	aaaa, errAAAA := c.lookup(ctx, host, dnsmessage.TypeAAAA)
	for _, rr := range aaaa {
		ip := rr.Body.(*dnsmessage.AAAAResource).AAAA
		out = append(out, net.IPAddr{IP: net.IP(ip[:])})
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, err := range []error{errA, errAAAA} {
		var de *net.DNSError
		if errors.As(err, &de) && !de.IsNotFound {
			return nil, err
		}
	}
	return nil, notFound(host, c.server)
}

// LookupCNAME returns the target of name's CNAME record (one hop; the
// managed-domain checks ask whether mta-sts.DOMAIN aliases the MX host,
// which an authoritative server answers without resolving the target).
// A name without a CNAME is not found.
func (c *Client) LookupCNAME(ctx context.Context, name string) (string, error) {
	rrs, err := c.lookup(ctx, name, dnsmessage.TypeCNAME)
	if err != nil {
		return "", err
	}
	return rrs[0].Body.(*dnsmessage.CNAMEResource).CNAME.String(), nil
}

// LookupAddr returns the PTR names of addr (an IP address).
func (c *Client) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	name, err := reverseName(addr)
	if err != nil {
		return nil, &net.DNSError{Err: err.Error(), Name: addr}
	}
	rrs, err := c.lookup(ctx, name, dnsmessage.TypePTR)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, rr.Body.(*dnsmessage.PTRResource).PTR.String())
	}
	return out, nil
}

func reverseName(addr string) (string, error) {
	ip := net.ParseIP(addr)
	if ip == nil {
		return "", errors.New("not an IP address")
	}
	var b strings.Builder
	if v4 := ip.To4(); v4 != nil {
		fmt.Fprintf(&b, "%d.%d.%d.%d.in-addr.arpa.", v4[3], v4[2], v4[1], v4[0])
		return b.String(), nil
	}
	const hex = "0123456789abcdef"
	for i := len(ip) - 1; i >= 0; i-- {
		b.WriteByte(hex[ip[i]&0xf])
		b.WriteByte('.')
		b.WriteByte(hex[ip[i]>>4])
		b.WriteByte('.')
	}
	b.WriteString("ip6.arpa.")
	return b.String(), nil
}

func notFound(name, server string) error {
	return &net.DNSError{Err: "no such host", Name: name, Server: server, IsNotFound: true}
}

func tempErr(name, server, why string, timeout bool) error {
	return &net.DNSError{Err: why, Name: name, Server: server, IsTemporary: true, IsTimeout: timeout}
}

// canonical returns name lower-cased and fully qualified, or "" when it
// is not a valid DNS name.
func canonical(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" || name == "." {
		return ""
	}
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	if len(name) > 254 {
		return ""
	}
	// Labels of 1–63 bytes (RFC 1035 §2.3.4) without control characters
	// (RFC 2181 §11 allows any other octet: SPF macros make such names).
	// Anything else is never sent: it is not found.
	for l := range strings.SplitSeq(name[:len(name)-1], ".") {
		if l == "" || len(l) > 63 {
			return ""
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if c < 0x20 || c == 0x7f {
				return ""
			}
		}
	}
	return name
}

func (c *Client) lookup(ctx context.Context, name string, typ dnsmessage.Type) ([]dnsmessage.Resource, error) {
	q := canonical(name)
	if q == "" {
		return nil, &net.DNSError{Err: "invalid domain name", Name: name, Server: c.server, IsNotFound: true}
	}
	key := cacheKey{q, typ}
	c.statsMu.Lock()
	c.queries++
	c.statsMu.Unlock()
	if e, ok := c.cached(key); ok {
		c.statsMu.Lock()
		c.hits++
		c.statsMu.Unlock()
		if e.rrs == nil {
			return nil, notFound(name, c.server)
		}
		return e.rrs, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rrs, ttl, err := c.exchange(ctx, q, typ)
	if err != nil {
		return nil, err
	}
	c.store(key, rrs, ttl)
	if rrs == nil {
		return nil, notFound(name, c.server)
	}
	return rrs, nil
}

func (c *Client) cached(key cacheKey) (entry, bool) {
	if c.maxEntries < 0 {
		return entry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache[key]
	if !ok {
		return entry{}, false
	}
	if !c.now().Before(e.expires) {
		delete(c.cache, key)
		return entry{}, false
	}
	return e, true
}

func (c *Client) store(key cacheKey, rrs []dnsmessage.Resource, ttl time.Duration) {
	if c.maxEntries < 0 || ttl <= 0 {
		return
	}
	ttl = min(ttl, c.maxTTL)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.cache) >= c.maxEntries {
		for k, e := range c.cache {
			if !now.Before(e.expires) {
				delete(c.cache, k)
			}
		}
		for k := range c.cache { // map order: an arbitrary victim
			if len(c.cache) < c.maxEntries {
				break
			}
			delete(c.cache, k)
		}
	}
	c.cache[key] = entry{rrs: rrs, expires: now.Add(ttl)}
}

// exchange asks the server once over UDP (twice on a timeout), then over
// TCP when the answer is truncated. It returns the records of type typ
// for q (following CNAMEs inside the answer), nil when there are none,
// and how long the answer may be kept.
func (c *Client) exchange(ctx context.Context, q string, typ dnsmessage.Type) ([]dnsmessage.Resource, time.Duration, error) {
	qname, err := dnsmessage.NewName(q)
	if err != nil {
		return nil, 0, &net.DNSError{Err: "invalid domain name", Name: q, Server: c.server, IsNotFound: true}
	}
	var idb [2]byte
	rand.Read(idb[:])
	id := binary.BigEndian.Uint16(idb[:])
	question := dnsmessage.Question{Name: qname, Type: typ, Class: dnsmessage.ClassINET}
	b := dnsmessage.NewBuilder(make([]byte, 2, 512), dnsmessage.Header{ID: id, RecursionDesired: true})
	b.EnableCompression()
	b.StartQuestions()
	b.Question(question)
	b.StartAdditionals()
	var opt dnsmessage.ResourceHeader
	opt.SetEDNS0(udpSize, dnsmessage.RCodeSuccess, false)
	b.OPTResource(opt, dnsmessage.OPTResource{})
	msg, err := b.Finish()
	if err != nil {
		return nil, 0, tempErr(q, c.server, err.Error(), false)
	}
	binary.BigEndian.PutUint16(msg, uint16(len(msg)-2))

	var resp []byte
	for attempt := 0; ; attempt++ {
		resp, err = c.udp(ctx, msg[2:], id)
		if err == nil || attempt == 1 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, 0, tempErr(q, c.server, err.Error(), isTimeout(err))
	}
	var p dnsmessage.Parser
	h, err := p.Start(resp)
	if err == nil && h.Truncated {
		if resp, err = c.tcp(ctx, msg, id); err != nil {
			return nil, 0, tempErr(q, c.server, err.Error(), isTimeout(err))
		}
		h, err = p.Start(resp)
	}
	if err != nil {
		return nil, 0, tempErr(q, c.server, "unreadable answer: "+err.Error(), false)
	}
	return c.answer(&p, h, question)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// answer reads a response whose header was parsed.
func (c *Client) answer(p *dnsmessage.Parser, h dnsmessage.Header, question dnsmessage.Question) ([]dnsmessage.Resource, time.Duration, error) {
	q := question.Name.String()
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 || !strings.EqualFold(qs[0].Name.String(), q) || qs[0].Type != question.Type {
		return nil, 0, tempErr(q, c.server, "answer does not match the question", false)
	}
	switch h.RCode {
	case dnsmessage.RCodeSuccess, dnsmessage.RCodeNameError:
	default:
		return nil, 0, tempErr(q, c.server, "server answered "+h.RCode.String(), false)
	}
	names := map[string]bool{q: true}
	ttl := time.Duration(-1)
	var rrs []dnsmessage.Resource
	for {
		rh, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return nil, 0, tempErr(q, c.server, "unreadable answer: "+err.Error(), false)
		}
		owner := strings.ToLower(rh.Name.String())
		if !names[owner] || (rh.Type != question.Type && rh.Type != dnsmessage.TypeCNAME) || len(rrs) >= c.maxRecords {
			if err := p.SkipAnswer(); err != nil {
				return nil, 0, tempErr(q, c.server, "unreadable answer: "+err.Error(), false)
			}
			continue
		}
		body, err := resourceBody(p, rh.Type)
		if err != nil {
			return nil, 0, tempErr(q, c.server, "unreadable answer: "+err.Error(), false)
		}
		rr := dnsmessage.Resource{Header: rh, Body: body}
		if t := time.Duration(rh.TTL) * time.Second; ttl < 0 || t < ttl {
			ttl = t
		}
		if rh.Type == dnsmessage.TypeCNAME && question.Type != dnsmessage.TypeCNAME {
			if len(names) <= maxCNAME {
				names[strings.ToLower(rr.Body.(*dnsmessage.CNAMEResource).CNAME.String())] = true
			}
			continue
		}
		rrs = append(rrs, rr)
	}
	if len(rrs) > 0 {
		return rrs, max(ttl, 0), nil
	}
	// Not found (NXDOMAIN or no data): kept for the SOA minimum.
	neg := negativeTTL
	if err := p.SkipAllAnswers(); err == nil {
		for {
			rh, err := p.AuthorityHeader()
			if err != nil {
				break
			}
			if rh.Type != dnsmessage.TypeSOA {
				if p.SkipAuthority() != nil {
					break
				}
				continue
			}
			soa, err := p.SOAResource()
			if err != nil {
				break
			}
			neg = time.Duration(min(rh.TTL, soa.MinTTL)) * time.Second
			break
		}
	}
	return nil, neg, nil
}

// resourceBody parses the body of the record whose header p just read.
func resourceBody(p *dnsmessage.Parser, t dnsmessage.Type) (dnsmessage.ResourceBody, error) {
	switch t {
	case dnsmessage.TypeTXT:
		return parsedBody(p.TXTResource())
	case dnsmessage.TypeMX:
		return parsedBody(p.MXResource())
	case dnsmessage.TypeA:
		return parsedBody(p.AResource())
	case dnsmessage.TypeAAAA:
		return parsedBody(p.AAAAResource())
	case dnsmessage.TypePTR:
		return parsedBody(p.PTRResource())
	case dnsmessage.TypeCNAME:
		return parsedBody(p.CNAMEResource())
	}
	return nil, fmt.Errorf("unexpected record type %v", t)
}

// parsedBody is a parsed record body as the ResourceBody its pointer is.
func parsedBody[T any, P interface {
	*T
	dnsmessage.ResourceBody
}](r T, err error) (dnsmessage.ResourceBody, error) {
	return P(&r), err
}

// roundTrip dials the server over network, writes msg and returns what
// read reads back. The connection's deadline is ctx's, or half the time
// left with half (room for a second attempt); the end of ctx interrupts
// it.
func (c *Client) roundTrip(ctx context.Context, network string, half bool, msg []byte, read func(conn net.Conn) ([]byte, error)) ([]byte, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, c.server)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		if half {
			dl = time.Now().Add(time.Until(dl) / 2)
		}
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(msg); err != nil {
		return nil, err
	}
	return read(conn)
}

// udp asks over UDP, in half the time left: room for the second attempt
// when the first gets no answer.
func (c *Client) udp(ctx context.Context, msg []byte, id uint16) ([]byte, error) {
	return c.roundTrip(ctx, "udp", true, msg, func(conn net.Conn) ([]byte, error) {
		buf := make([]byte, udpSize)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return nil, err
			}
			// A datagram with another id is not ours (RFC 5452 §9.1).
			if n >= 2 && binary.BigEndian.Uint16(buf) == id {
				return buf[:n], nil
			}
		}
	})
}

// tcp asks over TCP, the message and its answer each behind a two-byte
// length (RFC 1035 §4.2.2).
func (c *Client) tcp(ctx context.Context, msg []byte, id uint16) ([]byte, error) {
	return c.roundTrip(ctx, "tcp", false, msg, func(conn net.Conn) ([]byte, error) {
		var l [2]byte
		if _, err := io.ReadFull(conn, l[:]); err != nil {
			return nil, err
		}
		buf := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(conn, buf); err != nil {
			return nil, err
		}
		if len(buf) < 2 || binary.BigEndian.Uint16(buf) != id {
			return nil, errors.New("answer with another id")
		}
		return buf, nil
	})
}
