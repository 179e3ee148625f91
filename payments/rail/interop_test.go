package rail

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/internal/gethtest"
)

// openGeth opens a rail named dev on node with TUSD = token and the given
// depth.
func openGeth(t *testing.T, node *gethtest.Node, token string, depth string) Rail {
	t.Helper()
	// The flags the helper gives envelopd, parsed as serve would.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := RegisterFlags(fs)
	if err := fs.Parse(append(node.RailFlags("dev", token, gethtest.NewAddress()), "--confirmations", "dev="+depth)); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	set, err := Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := set.Rail("dev")
	return r
}

// gethPaid starts geth, deploys TUSD, pays amount of it to a new wallet
// and returns the node, a rail of the given depth and the Want of that
// payment.
func gethPaid(t *testing.T, depth string, amount int64) (*gethtest.Node, Rail, Want) {
	node := gethtest.Start(t)
	tusd := node.DeployToken()
	ours := gethtest.NewAddress()
	r := openGeth(t, node, tusd, depth)
	tx := node.TransferToken(tusd, ours, big.NewInt(amount))
	return node, r, Want{Chain: "dev", Tx: tx, Token: "TUSD", Amount: fmt.Sprint(amount), To: []string{ours}}
}

func check(t *testing.T, r Rail, w Want) Result {
	t.Helper()
	res, err := r.Check(context.Background(), w)
	if err != nil {
		t.Fatalf("Check(%+v): %v", w, err)
	}
	return res
}

// TestInteropGethPayments verifies real transactions on geth --dev with a
// real ERC-20: exact, overpaid, underpaid, wrong recipient, wrong token
// contract (a second deployment with the same symbol), native coin,
// reverted, missing.
func TestInteropGethPayments(t *testing.T) {
	node := gethtest.Start(t)
	tusd := node.DeployToken()
	lookalike := node.DeployToken() // same bytecode, same symbol "TUSD"
	ours, stranger := gethtest.NewAddress(), gethtest.NewAddress()
	r := openGeth(t, node, tusd, "1")
	thirty := big.NewInt(30_000_000)

	exact := node.TransferToken(tusd, ours, thirty)
	toStranger := node.TransferToken(tusd, stranger, thirty)
	short := node.TransferToken(tusd, ours, big.NewInt(29_990_000))
	wrongToken := node.TransferToken(lookalike, ours, thirty)
	native := node.SendNative(ours, big.NewInt(1e16))
	reverted := node.SendReverting(tusd, ours)
	missing := "0x" + strings.Repeat("ab", 32)

	want := func(tx, token, amount string) Want {
		// The wallet in EIP-55-like upper case: case is not identity.
		return Want{Chain: "dev", Tx: strings.ToUpper(tx[:10]) + tx[10:], Token: token, Amount: amount, To: []string{strings.ToUpper(ours)[:2] + strings.ToUpper(ours[2:])}}
	}
	for _, tc := range []struct {
		name   string
		want   Want
		state  State
		paid   string
		reason string
		warn   string
	}{
		{name: "exact", want: want(exact, "TUSD", "30000000"), state: Verified, paid: "30000000"},
		{name: "exact by contract address", want: want(exact, strings.ToUpper(tusd), "30000000"), state: Verified, paid: "30000000"},
		{name: "overpaid", want: want(exact, "TUSD", "29000000"), state: Verified, paid: "30000000", warn: "overpaid"},
		{name: "underpaid", want: want(short, "TUSD", "30000000"), state: Mismatch, paid: "29990000", reason: "underpaid: 29.99 TUSD paid, 30 wanted"},
		{name: "wrong recipient", want: want(toStranger, "TUSD", "30000000"), state: Mismatch, reason: "the transaction pays TUSD to " + stranger + ", not to " + ours},
		{name: "wrong token contract", want: want(wrongToken, "TUSD", "30000000"), state: Mismatch, reason: "the transaction pays our wallet in token contract " + lookalike + ", not TUSD (" + tusd + ")"},
		{name: "native coin", want: want(native, "ETH", "10000000000000000"), state: Verified, paid: "10000000000000000"},
		{name: "native wanted, token paid", want: want(exact, "ETH", "1"), state: Mismatch, paid: "0", reason: "the transaction pays 0 ETH to " + tusd + ", not to " + ours},
		{name: "reverted", want: want(reverted, "TUSD", "30000000"), state: Failed, reason: "the transaction reverted (receipt status 0)"},
		{name: "missing", want: want(missing, "TUSD", "30000000"), state: Pending, reason: "transaction not found (yet)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := check(t, r, tc.want)
			if res.State != tc.state || res.Paid != tc.paid || (tc.reason != "" && res.Reason != tc.reason) {
				t.Fatalf("result %+v; want state %s paid %q reason %q", res, tc.state, tc.paid, tc.reason)
			}
			if tc.warn != "" && (len(res.Warnings) != 1 || res.Warnings[0] != tc.warn) {
				t.Errorf("warnings %v, want [%s]", res.Warnings, tc.warn)
			}
			if res.State == Verified {
				if res.To != ours || res.From != node.Dev || res.Block == 0 || res.Confirmations < 1 {
					t.Errorf("verified result %+v: want to %s, from %s, a block and confirmations", res, ours, node.Dev)
				}
			}
		})
	}
}

// TestInteropGethConfirmations: a transfer is pending until it is 5
// blocks deep, then verified.
func TestInteropGethConfirmations(t *testing.T) {
	node, r, w := gethPaid(t, "5", 1_000_000)
	res := check(t, r, w)
	if res.State != Pending || res.Confirmations >= 5 || !strings.HasSuffix(res.Reason, " of 5 confirmations") {
		t.Fatalf("fresh transfer: %+v, want pending below 5 confirmations", res)
	}
	node.Mine(5)
	res = check(t, r, w)
	if res.State != Verified || res.Confirmations < 5 {
		t.Fatalf("after 5 more blocks: %+v, want verified", res)
	}
}

// TestInteropGethNodeDown: with the node stopped a check is an error (the
// caller retries); once the node is back the same check verifies.
func TestInteropGethNodeDown(t *testing.T) {
	node, r, w := gethPaid(t, "1", 2_500_000)
	node.Stop()
	if res, err := r.Check(context.Background(), w); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("node down: %+v, %v; want ErrUnreachable", res, err)
	}
	node.Restart()
	if res := check(t, r, w); res.State != Verified {
		t.Fatalf("node back: %+v", res)
	}
}

// TestInteropGethChainID: geth --dev is chain 1337. Named base it is
// refused at start; under a name envelopd does not know its id is taken
// and logged.
func TestInteropGethChainID(t *testing.T) {
	node := gethtest.Start(t)
	cfg, _ := ParseConfig([]string{"base=" + node.URL}, nil, nil, nil, nil, 0)
	_, err := Open(context.Background(), cfg, nil)
	var cid *ChainIDError
	if !errors.As(err, &cid) || cid.Got != gethtest.ChainID || cid.Want != 8453 {
		t.Fatalf("geth as base: %v, want a ChainIDError", err)
	}
	var logs bytes.Buffer
	cfg, _ = ParseConfig([]string{"dev=" + node.URL}, nil, nil, nil, nil, 0)
	if _, err := Open(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "chain_id=1337") {
		t.Errorf("logs %q lack the node's chain id", logs.String())
	}
}
