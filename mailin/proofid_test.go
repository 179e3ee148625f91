package mailin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// TestProofVariants ingests the PAY mails of testdata/proof_variants.json
// in order through the pipeline: one transaction however its proof is
// written is one payment (duplicate_proof for the others).
func TestProofVariants(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/proof_variants.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Chain    string           `json:"chain"`
			Proof    json.RawMessage  `json:"proof"`
			Want     string           `json:"want"`
			Errors   []protocols.Code `json:"errors"`
			Warnings []protocols.Code `json:"warnings"`
			Payment  string           `json:"payment"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "envelopd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := &Pipeline{Store: st, PaymentChains: func(c string) bool { return c == "base" || c == "solana" }}
	for i, c := range file.Cases {
		body := fmt.Sprintf(`{"v":"0.2.0","type":"pay","id":"pay_%d","amount":"1000","token":"USDC","chain":%q,"proof":%s}`, i, c.Chain, c.Proof)
		raw := fmt.Sprintf("From: payer%d@agents.test\r\nTo: bob@agents.test\r\nSubject: PAY | variant %d\r\n"+
			"Message-ID: <variant-%d@agents.test>\r\nContent-Type: text/plain\r\n\r\n%s\r\n", i, i, i, body)
		out, err := p.Ingest(ctx, []byte(raw), Meta{Source: "smtp"})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if out.Status != c.Want || !slices.Equal(codeList(out.Errors), c.Errors) {
			t.Errorf("case %d (%s %s): %s %v, want %s %v", i, c.Chain, c.Proof, out.Status, codeList(out.Errors), c.Want, c.Errors)
		}
		if w := codeList(out.Warnings); !slices.Equal(w, c.Warnings) {
			t.Errorf("case %d (%s %s): warnings %v, want %v", i, c.Chain, c.Proof, w, c.Warnings)
		}
		pay, err := st.GetPayment(ctx, out.ID)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if pay.State != c.Payment || pay.Sender != fmt.Sprintf("payer%d@agents.test", i) || pay.Amount != "1000" || pay.Token != "USDC" {
			t.Errorf("case %d (%s %s): payment %+v, want state %s", i, c.Chain, c.Proof, pay, c.Payment)
		}
	}
}

func codeList(ps protocols.Problems) []protocols.Code {
	var out []protocols.Code
	for _, p := range ps {
		out = append(out, p.Code)
	}
	return out
}
