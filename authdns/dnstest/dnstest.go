// Package dnstest is a tiny in-process authoritative DNS server on
// loopback (UDP and TCP, RFC 1035 §4.2) for tests of authdns and of what
// is built on it: plain `go test` exercises the real resolver code
// without the network or an external program.
//
// Answers larger than the client's EDNS0 size (512 bytes without EDNS0)
// are sent truncated over UDP, whole over TCP. A name marked ServFail
// answers SERVFAIL; one marked Silent never answers.
package dnstest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/net/dns/dnsmessage"
)

// Server serves a zone; add records before or while it serves.
type Server struct {
	udp *net.UDPConn
	tcp net.Listener

	mu       sync.RWMutex
	rrs      map[string][]dnsmessage.Resource // canonical name → records
	servfail map[string]bool
	silent   map[string]bool
	wg       sync.WaitGroup

	// Queries counts the questions received.
	Queries atomic.Int64
}

// Start serves on 127.0.0.1 (a free port, UDP and TCP on the same one).
func Start() (*Server, error) {
	for range 10 {
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, err
		}
		t, err := net.Listen("tcp", u.LocalAddr().String())
		if err != nil {
			u.Close()
			continue // the TCP port is taken: try another
		}
		s := &Server{udp: u, tcp: t, rrs: map[string][]dnsmessage.Resource{}, servfail: map[string]bool{}, silent: map[string]bool{}}
		s.wg.Add(2)
		go s.serveUDP()
		go s.serveTCP()
		return s, nil
	}
	return nil, errors.New("dnstest: no free port for UDP and TCP")
}

// Addr is the server's address (host:port).
func (s *Server) Addr() string { return s.udp.LocalAddr().String() }

// Close stops the server.
func (s *Server) Close() {
	s.udp.Close()
	s.tcp.Close()
	s.wg.Wait()
}

func canon(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

func mustName(name string) dnsmessage.Name {
	n, err := dnsmessage.NewName(canon(name))
	if err != nil {
		panic("dnstest: bad name " + name) // a test's own literal
	}
	return n
}

// Add adds a record with TTL 300.
func (s *Server) Add(name string, body dnsmessage.ResourceBody) { s.AddTTL(name, 300, body) }

// AddTTL adds a record with the given TTL (seconds).
func (s *Server) AddTTL(name string, ttl uint32, body dnsmessage.ResourceBody) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := canon(name)
	s.rrs[n] = append(s.rrs[n], dnsmessage.Resource{
		Header: dnsmessage.ResourceHeader{Name: mustName(n), Type: typeOf(body), Class: dnsmessage.ClassINET, TTL: ttl},
		Body:   body})
}

// TXT adds one TXT record made of the given strings (each at most 255
// bytes; longer ones are split).
func (s *Server) TXT(name string, strs ...string) {
	var parts []string
	for _, x := range strs {
		for len(x) > 255 {
			parts = append(parts, x[:255])
			x = x[255:]
		}
		parts = append(parts, x)
	}
	s.Add(name, &dnsmessage.TXTResource{TXT: parts})
}

// A adds an A or AAAA record for ip.
func (s *Server) A(name, ip string) {
	p := net.ParseIP(ip)
	if v4 := p.To4(); v4 != nil {
		s.Add(name, &dnsmessage.AResource{A: [4]byte(v4)})
		return
	}
	s.Add(name, &dnsmessage.AAAAResource{AAAA: [16]byte(p.To16())})
}

// MX adds an MX record.
func (s *Server) MX(name string, pref uint16, host string) {
	s.Add(name, &dnsmessage.MXResource{Pref: pref, MX: mustName(host)})
}

// CNAME adds a CNAME record.
func (s *Server) CNAME(name, target string) {
	s.Add(name, &dnsmessage.CNAMEResource{CNAME: mustName(target)})
}

// PTR adds a PTR record (name is the full reverse name).
func (s *Server) PTR(name, target string) {
	s.Add(name, &dnsmessage.PTRResource{PTR: mustName(target)})
}

// ServFail makes every question about name answer SERVFAIL.
func (s *Server) ServFail(name string) {
	s.mu.Lock()
	s.servfail[canon(name)] = true
	s.mu.Unlock()
}

// Silent makes every question about name go unanswered.
func (s *Server) Silent(name string) {
	s.mu.Lock()
	s.silent[canon(name)] = true
	s.mu.Unlock()
}

func (s *Server) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, addr, err := s.udp.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if resp := s.respond(buf[:n], true); resp != nil {
			s.udp.WriteToUDP(resp, addr)
		}
	}
}

func (s *Server) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			var l [2]byte
			if _, err := io.ReadFull(c, l[:]); err != nil {
				return
			}
			msg := make([]byte, binary.BigEndian.Uint16(l[:]))
			if _, err := io.ReadFull(c, msg); err != nil {
				return
			}
			resp := s.respond(msg, false)
			if resp == nil {
				return
			}
			out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
			c.Write(append(out, resp...))
		}()
	}
}

// respond builds the answer to msg, or nil for no answer.
func (s *Server) respond(msg []byte, udp bool) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	s.Queries.Add(1)
	limit := 512
	p.SkipAllQuestions()
	p.SkipAllAnswers()
	p.SkipAllAuthorities()
	for {
		rh, err := p.AdditionalHeader()
		if err != nil {
			break
		}
		if rh.Type == dnsmessage.TypeOPT {
			limit = max(int(rh.Class), 512)
		}
		p.SkipAdditional()
	}
	name := strings.ToLower(q.Name.String())
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.silent[name] {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	var answers []dnsmessage.Resource
	switch {
	case s.servfail[name]:
		rh.RCode = dnsmessage.RCodeServerFailure
	default:
		seen := 0
		for n := name; seen < 10; seen++ {
			rrs, ok := s.rrs[n]
			if !ok {
				if seen == 0 && !s.exists(n) {
					rh.RCode = dnsmessage.RCodeNameError
				}
				break
			}
			next := ""
			for _, rr := range rrs {
				switch rr.Header.Type {
				case q.Type:
					answers = append(answers, rr)
				case dnsmessage.TypeCNAME:
					answers = append(answers, rr)
					next = strings.ToLower(rr.Body.(*dnsmessage.CNAMEResource).CNAME.String())
				}
			}
			if next == "" {
				break
			}
			n = next
		}
	}
	build := func(trunc bool) ([]byte, error) {
		hh := rh
		hh.Truncated = trunc
		b := dnsmessage.NewBuilder(nil, hh)
		b.EnableCompression()
		b.StartQuestions()
		b.Question(q)
		b.StartAnswers()
		if !trunc {
			for _, rr := range answers {
				if err := addResource(&b, rr); err != nil {
					return nil, err
				}
			}
		}
		if len(answers) == 0 && rh.RCode != dnsmessage.RCodeServerFailure {
			b.StartAuthorities()
			b.SOAResource(dnsmessage.ResourceHeader{Name: mustName("test."), Class: dnsmessage.ClassINET, TTL: 60},
				dnsmessage.SOAResource{NS: mustName("ns.test."), MBox: mustName("hostmaster.test."), Serial: 1, Refresh: 60, Retry: 60, Expire: 60, MinTTL: 60})
		}
		return b.Finish()
	}
	resp, err := build(false)
	if err != nil {
		return nil
	}
	if udp && len(resp) > limit {
		resp, _ = build(true)
	}
	return resp
}

// exists reports whether name or a name below it has records (an empty
// non-terminal answers NOERROR without data, RFC 8020).
func (s *Server) exists(name string) bool {
	for n := range s.rrs {
		if n == name || strings.HasSuffix(n, "."+name) {
			return true
		}
	}
	return false
}

func typeOf(body dnsmessage.ResourceBody) dnsmessage.Type {
	switch body.(type) {
	case *dnsmessage.TXTResource:
		return dnsmessage.TypeTXT
	case *dnsmessage.MXResource:
		return dnsmessage.TypeMX
	case *dnsmessage.AResource:
		return dnsmessage.TypeA
	case *dnsmessage.AAAAResource:
		return dnsmessage.TypeAAAA
	case *dnsmessage.CNAMEResource:
		return dnsmessage.TypeCNAME
	case *dnsmessage.PTRResource:
		return dnsmessage.TypePTR
	}
	panic("dnstest: unsupported record type") // a test's own literal
}

func addResource(b *dnsmessage.Builder, rr dnsmessage.Resource) error {
	h := rr.Header
	switch body := rr.Body.(type) {
	case *dnsmessage.TXTResource:
		return b.TXTResource(h, *body)
	case *dnsmessage.MXResource:
		return b.MXResource(h, *body)
	case *dnsmessage.AResource:
		return b.AResource(h, *body)
	case *dnsmessage.AAAAResource:
		return b.AAAAResource(h, *body)
	case *dnsmessage.CNAMEResource:
		return b.CNAMEResource(h, *body)
	case *dnsmessage.PTRResource:
		return b.PTRResource(h, *body)
	}
	return errors.New("dnstest: unsupported record type")
}
