package senderauth_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/knottest"
	"github.com/envelopd/envelopd/senderauth"
)

func dmarcRecords() []knottest.Record {
	var recs []knottest.Record
	for n, v := range dmarcZone {
		recs = append(recs, knottest.TXT(n, v))
	}
	return append(recs, knottest.TXT("_dmarc.two.test", "v=DMARC1; p=reject"), knottest.TXT("_dmarc.two.test", "v=DMARC1; p=none"))
}

// TestInteropDMARCMatrix runs the DMARC matrix (policies, strict and
// relaxed alignment, sp=, pct=, public-suffix subdomains, temperror from
// a zone that does not load) with the records served by Knot.
func TestInteropDMARCMatrix(t *testing.T) {
	interop(t)
	addr := knottest.Start(t, dmarcRecords(), "_dmarc.broken.test")
	r, err := authdns.New(authdns.Config{Server: addr, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n := dmarcMatrix(t, r); n < 25 {
		t.Fatalf("%d cases", n)
	}
}

// opendmarcCheck is opendmarc-check's reading of a domain's record, with
// /etc/resolv.conf naming the Knot server (in a private mount namespace:
// the program takes no server argument).
func opendmarcCheck(t *testing.T, resolvConf, domain string) map[string]string {
	t.Helper()
	bin, err := exec.LookPath("opendmarc-check")
	if err != nil {
		bin = "/usr/sbin/opendmarc-check"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("opendmarc-check (Debian opendmarc): %v", err)
	}
	cmd := exec.Command("unshare", "-m", "sh", "-c", `mount --bind "$1" /etc/resolv.conf && exec "$2" "$3"`, "sh", resolvConf, bin, domain)
	out, _ := cmd.CombinedOutput()
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ": ")
		if ok {
			got[k] = v
		}
	}
	if strings.Contains(string(out), "lacked a DMARC record") || strings.Contains(string(out), "opendmarc_policy_query_dmarc") {
		got["error"] = strings.TrimSpace(string(out))
	}
	return got
}

// TestInteropDMARCRecords compares envelopd's reading of each policy
// record of the matrix with OpenDMARC's (opendmarc-check): policy,
// subdomain policy, pct and both alignment modes; or both find no usable
// record.
func TestInteropDMARCRecords(t *testing.T) {
	interop(t)
	// opendmarc-check reads /etc/resolv.conf, which has no port: Knot on
	// port 53 of a loopback address of its own.
	addr := knottest.StartAt(t, "127.0.29.1:53", dmarcRecords())
	rc := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(rc, []byte("nameserver 127.0.29.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := authdns.New(authdns.Config{Server: addr, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"two.test", "none.test"}
	for n := range dmarcZone {
		names = append(names, strings.TrimPrefix(n, "_dmarc."))
	}
	slices.Sort(names)
	word := map[string]string{"r": "relaxed", "s": "strict"}
	agree := 0
	for _, d := range names {
		ref := opendmarcCheck(t, rc, d)
		rec, err := senderauth.LookupRecord(context.Background(), r, d)
		if rec == nil || err != nil {
			switch why := knownDMARCDivergences[d]; {
			case ref["Domain policy"] == "":
				agree++
			case why != "":
				t.Logf("known divergence %s: envelopd finds no usable record, OpenDMARC reads %v (%s)", d, ref, why)
			default:
				t.Errorf("%s: envelopd finds no usable record (%v), OpenDMARC reads %v", d, err, ref)
			}
			continue
		}
		sp := rec.SubdomainPolicy
		if sp == "" {
			sp = "unspecified" // p= then applies to subdomains too
		}
		mine := map[string]string{"Domain policy": rec.Policy, "Subdomain policy": sp, "Sample percentage": strconv.Itoa(rec.Percent),
			"DKIM alignment": word[rec.DKIMAlignment], "SPF alignment": word[rec.SPFAlignment]}
		same := true
		for k, v := range mine {
			if ref[k] != v {
				same = false
			}
		}
		switch why := knownDMARCDivergences[d]; {
		case same:
			agree++
		case why != "":
			t.Logf("known divergence %s: envelopd %v, OpenDMARC %v (%s)", d, mine, ref, why)
		default:
			t.Errorf("%s: envelopd %v, OpenDMARC %v", d, mine, ref)
		}
	}
	t.Logf("%d of %d records read alike", agree, len(names))
}

// knownDMARCDivergences: records OpenDMARC reads otherwise, and why
// envelopd keeps its reading (docs/authentication.md).
var knownDMARCDivergences = map[string]string{
	"notfirst.test":    "v=DMARC1 not the first tag: RFC 7489 §6.3 says the record MUST be ignored; OpenDMARC reads it",
	"two.test":         "two DMARC records: RFC 7489 §6.6.3 step 5 says no policy applies; OpenDMARC takes one",
	"ruaonly.test":     "no p= but a rua=: RFC 7489 §6.6.3 step 6 says p=none; OpenDMARC refuses the record",
	"unknowntags.test": "pct=abc: RFC 7489 §6.3 says a syntax error falls back to the default (100); OpenDMARC reads 0",
}

// TestInteropARC verifies the dkimpy chains with the keys served by Knot
// and compares each verdict with dkimpy's arc_verify run now against the
// same server.
func TestInteropARC(t *testing.T) {
	interop(t)
	var recs []knottest.Record
	f, err := os.Open("testdata/arc/keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if n, v, ok := strings.Cut(sc.Text(), " "); ok {
			recs = append(recs, knottest.TXT(n, v))
		}
	}
	f.Close()
	addr := knottest.Start(t, recs)
	r, err := authdns.New(authdns.Config{Server: addr, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/arc/*.eml")
	if len(files) < 7 {
		t.Fatalf("%d chains", len(files))
	}
	out, err := exec.Command("/usr/bin/python3", append([]string{"testdata/interop/arc_verify.py", addr}, files...)...).Output()
	if err != nil {
		t.Fatalf("dkimpy (Debian python3-dkim): %v", err)
	}
	var ref map[string]struct {
		CV      string   `json:"cv"`
		Sealers []string `json:"sealers"`
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		raw, _ := os.ReadFile(file)
		got := senderauth.VerifyARC(context.Background(), r, raw)
		want := ref[file]
		sealers := slices.Clone(want.Sealers)
		slices.Reverse(sealers)
		if got.Result != want.CV || (got.Result == "pass" && !slices.Equal(got.Sealers, sealers)) {
			t.Errorf("%s: envelopd %s %v (%s), dkimpy %s %v", file, got.Result, got.Sealers, got.Reason, want.CV, want.Sealers)
		}
	}
}

// TestInteropARCSealVerifiedByDkimpy: chains envelopd sealed (a first set
// on a plain mail, and a second set on dkimpy's list.test chain) pass
// dkimpy's arc_verify against Knot serving the keys — with an RSA key;
// dkimpy refuses Ed25519 seals ("unknown signature algorithm"), which
// TestSealARC checks with envelopd's own verifier only.
func TestInteropARCSealVerifiedByDkimpy(t *testing.T) {
	interop(t)
	var recs []knottest.Record
	keys, err := os.ReadFile("testdata/arc/keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(keys)), "\n") {
		if n, v, ok := strings.Cut(line, " "); ok {
			recs = append(recs, knottest.TXT(n, v))
		}
	}
	var signers []dkim.Signer
	for _, algo := range []string{"rsa"} {
		k, err := dkim.GenerateKey(algo)
		if err != nil {
			t.Fatal(err)
		}
		d := algo + ".relay.test"
		rec, err := dkim.TXTRecord(d, "arc", k.Public())
		if err != nil {
			t.Fatal(err)
		}
		n, v, _ := strings.Cut(rec, " ")
		recs = append(recs, knottest.TXT(n, v))
		signers = append(signers, dkim.Signer{Domain: d, Selector: "arc", Key: k})
	}
	addr := knottest.Start(t, recs)
	r, err := authdns.New(authdns.Config{Server: addr, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := os.ReadFile("testdata/arc/forwarded.eml")
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("From: a@relay.test\r\nTo: b@far.test\r\nSubject: hi\r\nDate: Fri, 27 Nov 2026 12:00:00 +0000\r\nMessage-ID: <x@relay.test>\r\n\r\nhello\r\n")
	dir := t.TempDir()
	want := map[string][]string{}
	var files []string
	for _, s := range signers {
		for name, in := range map[string][]byte{"first": plain, "second": fwd} {
			out, err := senderauth.SealARC(context.Background(), r, in, "mx.relay.test; arc=pass", s, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, s.Domain+"-"+name+".eml")
			os.WriteFile(f, out, 0o644)
			files = append(files, f)
			want[f] = []string{s.Domain}
			if name == "second" {
				want[f] = []string{s.Domain, "list.test"} // dkimpy lists the newest first
			}
		}
	}
	out, err := exec.Command("/usr/bin/python3", append([]string{"testdata/interop/arc_verify.py", addr}, files...)...).Output()
	if err != nil {
		t.Fatalf("dkimpy: %v", err)
	}
	var ref map[string]struct {
		CV      string   `json:"cv"`
		Sealers []string `json:"sealers"`
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if got := ref[f]; got.CV != "pass" || !slices.Equal(got.Sealers, want[f]) {
			t.Errorf("%s: dkimpy says %s %v, want pass %v", filepath.Base(f), got.CV, got.Sealers, want[f])
		}
	}
}
