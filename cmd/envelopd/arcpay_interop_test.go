package main

import (
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/envelopd/envelopd/internal/gethtest"
	"github.com/envelopd/envelopd/internal/knottest"
	"github.com/envelopd/envelopd/store"
)

// TestInteropARCForwardedPay is TestServeARCForwardedPay against the real
// peers: dkimpy's dkimsign and arcsign make the forwarded PAY (and its
// forged twins) at test time for a TestToken transfer made on a real geth
// --dev, Knot serves the keys, SPF and DMARC records, and serve verifies
// the payment through the geth rail. The trusted forwarder's PAY is
// authenticated as payer.test and its payment verified; the forged ARC
// sets are not authenticated and their payments stay unverified.
func TestInteropARCForwardedPay(t *testing.T) {
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("ENVELOPD_INTEROP=1 runs it against dkimpy, Knot and geth")
	}
	n := gethtest.Start(t)
	token := n.DeployToken()
	ours := gethtest.NewAddress()
	tx := n.TransferToken(token, ours, big.NewInt(5_000_000))
	dir := t.TempDir()
	gen := exec.Command("/usr/bin/python3", filepath.Join(arcPayDir, "gen.py"), "--out", dir,
		"--tx", tx, "--amount", "5000000", "--token", gethtest.TokenSymbol, "--chain", "devchain")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("gen.py (dkimpy's dkimsign and arcsign, Debian python3-dkim): %v\n%s", err, out)
	}
	var recs []knottest.Record
	for _, r := range readRecords(t, filepath.Join(dir, "records.txt")) {
		recs = append(recs, knottest.TXT(r[0], r[1]))
	}
	dns := knottest.Start(t, recs)
	for _, c := range arcPayCases {
		t.Run(c.file, func(t *testing.T) {
			p := checkARCPay(t, dir, dns, n.RailFlags("devchain", token, ours), c)
			if c.state == store.PaymentVerified && (p.Paid != "5000000" || p.From != n.Dev || p.To != ours || p.Confirmations < 1) {
				t.Errorf("verified payment %+v, want 5000000 from %s to %s", p, n.Dev, ours)
			}
		})
	}
}
