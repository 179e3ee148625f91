package gethtest

import (
	"math/big"
	"os"
	"strings"
	"testing"
)

// TestInteropGethDev runs the helper's steps against a real geth --dev:
// deploy, transfer, native transfer, revert, mine, stop and restart.
func TestInteropGethDev(t *testing.T) {
	n := Start(t)
	var id string
	n.MustCall("eth_chainId", &id)
	if id != "0x539" {
		t.Fatalf("chain id %s, want 0x539 (1337)", id)
	}
	token := n.DeployToken()
	other := n.DeployToken()
	if token == other {
		t.Fatal("two deployments, one address")
	}
	to := NewAddress()
	tx := n.TransferToken(token, to, big.NewInt(30_000_000))
	var bal string
	n.MustCall("eth_call", &bal, map[string]any{"to": token, "data": "0x70a08231" + strings.Repeat("0", 24) + to[2:]}, "latest")
	if v, _ := new(big.Int).SetString(strings.TrimPrefix(bal, "0x"), 16); v == nil || v.Int64() != 30_000_000 {
		t.Fatalf("balance after %s = %s", tx, bal)
	}
	n.SendNative(to, big.NewInt(1e16))
	n.SendReverting(token, to)
	h := n.Head()
	n.Mine(3)
	if n.Head() < h+3 {
		t.Fatalf("head %d after mining 3 from %d", n.Head(), h)
	}
	n.Stop()
	if err := n.Call("eth_blockNumber", nil); err == nil {
		t.Fatal("stopped node still answers")
	}
	n.Restart()
	if got := n.Head(); got < h+3 {
		t.Fatalf("head after restart %d, want ≥ %d (same chain)", got, h+3)
	}
	n.Wait(tx)
}

// TestCIInstallsThisVersion: .ci/run installs the geth release this
// package is written against.
func TestCIInstallsThisVersion(t *testing.T) {
	b, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "geth_version="+Version+"\n") {
		t.Errorf(".ci/run does not install geth %s", Version)
	}
}
