// Package gethtest gives tests a real EVM chain: geth in dev mode
// (go-ethereum's "--dev": a single-node proof-of-authority chain, id 1337,
// a funded and unlocked dev account, a block sealed for each pending
// transaction) on a free loopback port with a temporary data directory,
// and the steps payment tests need: deploy the test ERC-20 (testdata/
// TestToken.sol, compiled once with solc-js 0.8.37), send token and native
// transfers and a transaction that reverts, mine empty blocks for
// confirmations, stop the node and start it again.
//
// Tests using it run only under ENVELOPD_INTEROP=1 (they skip otherwise);
// there a missing geth is a failure. geth is found on PATH, else in
// $HOME/.cache/bin (where .ci/run installs it with go install).
package gethtest

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/freeport"
)

// Version is the geth release the interop suite is written against.
const Version = "1.17.10"

// ChainID is the chain id of geth's dev mode.
const ChainID = 1337

//go:embed testdata/TestToken.bin
var tokenBin string

// TokenDecimals and TokenSupply describe TestToken: the deployer holds the
// whole supply (one billion units of 6 decimals).
const (
	TokenSymbol   = "TUSD"
	TokenDecimals = 6
)

// TokenSupply is TestToken's total supply in smallest units.
var TokenSupply = new(big.Int).Mul(big.NewInt(1_000_000_000), big.NewInt(1_000_000))

// Node is a running (or stopped) geth --dev.
type Node struct {
	t       testing.TB
	bin     string
	dir     string // data directory, kept across Stop and Start
	port    int
	URL     string // http://127.0.0.1:PORT
	Dev     string // the funded, unlocked dev account (lower case)
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	id      atomic.Int64
}

// Binary finds geth: on PATH, else $HOME/.cache/bin/geth.
func Binary() (string, error) {
	if p, err := exec.LookPath("geth"); err == nil {
		return p, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "bin", "geth")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("geth not found on PATH or in ~/.cache/bin (GOBIN=$HOME/.cache/bin go install github.com/ethereum/go-ethereum/cmd/geth@v%s)", Version)
}

// Start runs geth --dev for the test and stops it when the test ends. It
// skips the test unless ENVELOPD_INTEROP=1, and fails it there when geth
// cannot be found or started.
func Start(t testing.TB) *Node {
	t.Helper()
	if os.Getenv("ENVELOPD_INTEROP") != "1" {
		t.Skip("geth interop: set ENVELOPD_INTEROP=1")
	}
	bin, err := Binary()
	if err != nil {
		t.Fatalf("ENVELOPD_INTEROP=1 and %v", err)
	}
	n := &Node{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(func() { n.Stop() })
	var last error
	for try := 0; try < 3; try++ {
		port, err := freeport.Loopback()
		if err != nil {
			t.Fatal(err)
		}
		n.port = port
		n.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
		if last = n.start(); last == nil {
			break
		}
	}
	if last != nil {
		t.Fatalf("starting geth --dev: %v\n%s", last, n.logTail())
	}
	var accounts []string
	n.MustCall("eth_accounts", &accounts)
	if len(accounts) == 0 {
		t.Fatal("geth --dev has no dev account")
	}
	n.Dev = strings.ToLower(accounts[0])
	return n
}

// start launches geth on n.port with n.dir and waits until it answers.
func (n *Node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return errors.New("already running")
	}
	n.logPath = filepath.Join(n.dir, "geth.log")
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	authPort, err := freeport.Loopback()
	if err != nil {
		logf.Close()
		return err
	}
	cmd := exec.Command(n.bin, "--dev",
		"--datadir", filepath.Join(n.dir, "data"),
		"--http", "--http.addr", "127.0.0.1", "--http.port", fmt.Sprint(n.port), "--http.api", "eth,net,web3",
		"--authrpc.addr", "127.0.0.1", "--authrpc.port", fmt.Sprint(authPort),
		"--ipcdisable", "--nodiscover", "--maxpeers", "0", "--port", "0", "--cache", "256", "--verbosity", "3")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			n.cmd = nil
			return errors.New("geth exited during start")
		default:
		}
		var id string
		if err := n.call(context.Background(), "eth_chainId", &id); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.stopLocked()
	return errors.New("geth did not answer within 60 s")
}

// Stop stops geth (SIGINT, then SIGKILL after 10 s) and waits for it to
// exit. The data directory is kept: Restart continues the same chain.
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopLocked()
}

func (n *Node) stopLocked() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		n.cmd.Process.Kill()
		<-n.exited
	}
	n.cmd = nil
}

// Restart starts a stopped node again on the same port and data directory.
func (n *Node) Restart() {
	n.t.Helper()
	if err := n.start(); err != nil {
		n.t.Fatalf("restarting geth: %v\n%s", err, n.logTail())
	}
}

func (n *Node) logTail() string {
	b, _ := os.ReadFile(n.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// call runs a JSON-RPC method against the node and decodes its result.
func (n *Node) call(ctx context.Context, method string, out any, params ...any) error {
	if params == nil {
		params = []any{}
	}
	id := n.id.Add(1)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%s: %v: %s", method, err, raw)
	}
	if r.Error != nil {
		return fmt.Errorf("%s: %d %s", method, r.Error.Code, r.Error.Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Result, out)
}

// Call runs a JSON-RPC method and decodes its result into out (nil to
// drop it).
func (n *Node) Call(method string, out any, params ...any) error {
	return n.call(context.Background(), method, out, params...)
}

// MustCall is Call failing the test on error.
func (n *Node) MustCall(method string, out any, params ...any) {
	n.t.Helper()
	if err := n.Call(method, out, params...); err != nil {
		n.t.Fatalf("%v\n%s", err, n.logTail())
	}
}

// Receipt is the part of a transaction receipt tests look at.
type Receipt struct {
	TransactionHash string  `json:"transactionHash"`
	BlockNumber     string  `json:"blockNumber"`
	Status          string  `json:"status"`
	ContractAddress *string `json:"contractAddress"`
}

// Block is the receipt's block number.
func (r Receipt) Block() uint64 {
	n, _ := new(big.Int).SetString(strings.TrimPrefix(r.BlockNumber, "0x"), 16)
	if n == nil {
		return 0
	}
	return n.Uint64()
}

// Send submits a transaction from the dev account (eth_sendTransaction)
// and returns its hash without waiting for it.
func (n *Node) Send(tx map[string]any) string {
	n.t.Helper()
	if _, ok := tx["from"]; !ok {
		tx["from"] = n.Dev
	}
	var hash string
	n.MustCall("eth_sendTransaction", &hash, tx)
	return strings.ToLower(hash)
}

// Wait waits (up to 30 s) for a transaction's receipt; "transaction
// indexing is in progress" and null both mean not yet.
func (n *Node) Wait(hash string) Receipt {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var r *Receipt
		err := n.Call("eth_getTransactionReceipt", &r, hash)
		if err == nil && r != nil {
			return *r
		}
		if err != nil && !strings.Contains(err.Error(), "indexing is in progress") {
			n.t.Fatalf("receipt of %s: %v", hash, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.t.Fatalf("no receipt for %s within 30 s\n%s", hash, n.logTail())
	return Receipt{}
}

// DeployToken deploys a new TestToken (symbol TUSD, 6 decimals, the whole
// supply held by the dev account) and returns its address. Two calls give
// two contracts with one symbol.
func (n *Node) DeployToken() string {
	n.t.Helper()
	r := n.Wait(n.Send(map[string]any{"data": "0x" + strings.TrimSpace(tokenBin), "gas": "0x200000"}))
	if r.Status != "0x1" || r.ContractAddress == nil {
		n.t.Fatalf("deploying TestToken: receipt %+v", r)
	}
	return strings.ToLower(*r.ContractAddress)
}

// transferData is the calldata of ERC-20 transfer(to, amount).
func transferData(to string, amount *big.Int) string {
	return fmt.Sprintf("0xa9059cbb%064s%064x", strings.TrimPrefix(strings.ToLower(to), "0x"), amount)
}

// TransferToken sends amount (smallest units) of token from the dev
// account to to, waits for it to be mined and returns its hash.
func (n *Node) TransferToken(token, to string, amount *big.Int) string {
	n.t.Helper()
	hash := n.Send(map[string]any{"to": token, "data": transferData(to, amount)})
	if r := n.Wait(hash); r.Status != "0x1" {
		n.t.Fatalf("token transfer %s reverted", hash)
	}
	return hash
}

// SendNative sends wei from the dev account to to, waits for it to be
// mined and returns its hash.
func (n *Node) SendNative(to string, wei *big.Int) string {
	n.t.Helper()
	hash := n.Send(map[string]any{"to": to, "value": fmt.Sprintf("0x%x", wei)})
	if r := n.Wait(hash); r.Status != "0x1" {
		n.t.Fatalf("native transfer %s failed", hash)
	}
	return hash
}

// SendReverting sends a token transfer of more than the whole supply to
// to: it is mined and reverts (receipt status 0). The explicit gas keeps
// eth_sendTransaction from refusing it at estimation.
func (n *Node) SendReverting(token, to string) string {
	n.t.Helper()
	over := new(big.Int).Add(TokenSupply, big.NewInt(1))
	hash := n.Send(map[string]any{"to": token, "data": transferData(to, over), "gas": "0x30000"})
	if r := n.Wait(hash); r.Status != "0x0" {
		n.t.Fatalf("transaction %s did not revert (status %s)", hash, r.Status)
	}
	return hash
}

// Head is the number of the latest block.
func (n *Node) Head() uint64 {
	n.t.Helper()
	var h string
	n.MustCall("eth_blockNumber", &h)
	v, ok := new(big.Int).SetString(strings.TrimPrefix(h, "0x"), 16)
	if !ok {
		n.t.Fatalf("eth_blockNumber %q", h)
	}
	return v.Uint64()
}

// Mine advances the head by at least blocks, one zero-value transaction
// from the dev account to itself per block (dev mode seals a block per
// pending transaction).
func (n *Node) Mine(blocks int) {
	n.t.Helper()
	target := n.Head() + uint64(blocks)
	for n.Head() < target {
		n.Wait(n.Send(map[string]any{"to": n.Dev, "value": "0x0"}))
	}
}

// NewAddress returns a fresh random address (no key: it can receive only).
func NewAddress() string {
	b := make([]byte, 20)
	rand.Read(b)
	return "0x" + hex.EncodeToString(b)
}

// RailFlags are the envelopd flags that verify payments on this node
// under the chain name chain (any name but the known ones: dev mode is
// chain 1337): the rail, TestToken token as TUSD, our wallet, and one
// confirmation.
func (n *Node) RailFlags(chain, token, wallet string) []string {
	return []string{
		"--rail", chain + "=" + n.URL,
		"--token", chain + ":" + TokenSymbol + "=" + token + fmt.Sprintf(":%d", TokenDecimals),
		"--wallet", chain + "=" + wallet,
		"--confirmations", chain + "=1",
	}
}
