package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/aicp"
	"github.com/envelopd/envelopd/protocols/vacant"
	"github.com/envelopd/envelopd/store"
)

func runCmd(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &env{args: args, stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

func keyFiles(t *testing.T) (ed25519.PrivateKey, string, string) {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "k.pem")
	seedFile := filepath.Join(dir, "k.seed")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seedFile, []byte("BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return priv, pemFile, seedFile
}

func TestAICPSign(t *testing.T) {
	priv, pemFile, seedFile := keyFiles(t)
	keys := map[string][]byte{"alice": priv.Public().(ed25519.PublicKey)}
	for _, kf := range []string{pemFile, seedFile} {
		code, out, errs := runCmd(t, `{"from":"alice","to":"bob","body":"hi <b> & \u2028"}`,
			"aicp", "sign", "--key", kf, "--now", "2026-05-06T12:00:00Z")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", kf, code, errs)
		}
		r := aicp.Validate([]byte(out), aicp.Options{Keys: keys, Now: time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)})
		if !r.Valid || !strings.Contains(out, `"timestamp":1778068800`) {
			t.Errorf("%s: output %s: %v", kf, out, r.Errors)
		}
	}
	// A message that stays invalid after filling: printed, warned, exit 1.
	code, out, errs := runCmd(t, `{"from":"alice","to":"bob","body":"x","timestamp":5}`, "aicp", "sign", "--key", seedFile, "--now", "2026-05-06T12:00:00Z")
	if code != 1 || out == "" || !strings.Contains(errs, "stale_timestamp") {
		t.Errorf("stale: exit %d, out %q, err %q", code, out, errs)
	}
	if code, _, _ := runCmd(t, `{}`, "aicp", "sign"); code != 2 {
		t.Errorf("no --key: exit %d", code)
	}
}

func TestVacantSign(t *testing.T) {
	priv, pemFile, _ := keyFiles(t)
	from := hex.EncodeToString(priv.Public().(ed25519.PublicKey))
	to := strings.Repeat("ab", 32)
	code, out, errs := runCmd(t, "", "vacant", "sign", "--key", pemFile, "--to", to, "--seq", "1", "--text", "hello & <b>", "--now", "2026-05-06T12:00:00Z")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := vacant.Validate([]byte(out))
	if !r.Valid || r.Links[0].Seq != 1 || r.Links[0].Chain != from+">"+to {
		t.Fatalf("output %s: %+v", out, r)
	}
	first := r.Links[0]

	// From a message file, chain position from the store.
	db := filepath.Join(t.TempDir(), "e.db")
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Ingest(ctx, &store.Incoming{Direction: store.DirOut, Raw: []byte("Subject: x\r\n\r\nx\r\n"), MessageID: "m1@example.com",
		ReceivedAt: time.Now(), Status: store.StatusAccepted, Links: []protocols.Link{first}})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	msgFile := filepath.Join(t.TempDir(), "msg.json")
	if err := os.WriteFile(msgFile, []byte(`{"role":"ROLE_AGENT","parts":[{"type":"text","text":"second"}],"messageId":"m-2","selfEval":{"a":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCmd(t, "", "vacant", "sign", "--key", pemFile, "--to", to, "--db", db, msgFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r = vacant.Validate([]byte(out))
	if !r.Valid || r.Links[0].Seq != 2 || r.Links[0].Prev != first.Hash {
		t.Errorf("second envelope %s: %+v, want seq 2 prev %s", out, r, first.Hash)
	}

	for name, args := range map[string][]string{
		"bad to":        {"--key", pemFile, "--to", "xyz", "--seq", "1", "--text", "x"},
		"prev, no seq":  {"--key", pemFile, "--to", to, "--prev", to, "--text", "x"},
		"seq 2 no prev": {"--key", pemFile, "--to", to, "--seq", "2", "--text", "x"},
		"no store":      {"--key", pemFile, "--to", to, "--db", filepath.Join(t.TempDir(), "none.db"), "--text", "x"},
	} {
		if code, _, _ := runCmd(t, "", append([]string{"vacant", "sign"}, args...)...); code != 2 {
			t.Errorf("%s: exit %d, want 2", name, code)
		}
	}
}
