package rail

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// scenario is one testdata file: a node's canned answers and the checks
// run against them.
type scenario struct {
	Comment       string            `json:"comment"`
	Chain         string            `json:"chain"`
	Confirmations string            `json:"confirmations"` // N on EVM, confirmed|finalized on Solana
	Answers       map[string]answer `json:"answers"`
	Tokens        []string          `json:"tokens"` // --token values
	Cases         []struct {
		Name    string            `json:"name"`
		Want    Want              `json:"want"`
		Answers map[string]answer `json:"answers"`
		Expect  map[string]any    `json:"expect"`
	} `json:"cases"`
}

func (s *scenario) UnmarshalJSON(b []byte) error {
	type plain scenario
	var raw struct {
		plain
		Confirmations json.RawMessage `json:"confirmations"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*s = scenario(raw.plain)
	s.Confirmations = strings.Trim(string(raw.Confirmations), `"`)
	return nil
}

// runScenarios runs every case of every file in dir against a fake node.
func runScenarios(t *testing.T, dir string) {
	for file, sc := range loadScenarios(t, dir) {
		if len(sc.Cases) == 0 {
			t.Fatalf("%s: no cases", file)
		}
		for _, tc := range sc.Cases {
			t.Run(file+"/"+tc.Name, func(t *testing.T) {
				t.Parallel()
				answers := map[string]answer{}
				for k, v := range sc.Answers {
					answers[k] = v
				}
				for k, v := range tc.Answers {
					answers[k] = v
				}
				node := newFakeNode(t, answers)
				var confs []string
				if sc.Confirmations != "" {
					confs = []string{sc.Chain + "=" + sc.Confirmations}
				}
				r := openRail(t, sc.Chain, node.url(), sc.Tokens, confs, 0)
				before := len(node.methods())
				res, err := r.Check(context.Background(), tc.Want)
				assertOutcome(t, tc.Expect, res, err, len(node.methods())-before)
			})
		}
	}
}

// assertOutcome compares the fields expect names with the result (as its
// JSON), the error text ("error"), and the number of calls made ("calls").
func assertOutcome(t *testing.T, expect map[string]any, res Result, err error, calls int) {
	t.Helper()
	if want, ok := expect["error"]; ok {
		if err == nil || !strings.Contains(err.Error(), want.(string)) {
			t.Fatalf("error = %v, want one containing %q", err, want)
		}
		noSecret(t, "error", err.Error())
		return
	}
	if err != nil {
		noSecret(t, "error", err.Error())
		t.Fatalf("Check: %v", err)
	}
	if want, ok := expect["calls"]; ok && int(want.(float64)) != calls {
		t.Errorf("calls = %d, want %v", calls, want)
	}
	b, _ := json.Marshal(res)
	var got map[string]any
	json.Unmarshal(b, &got)
	for k, want := range expect {
		if k == "error" || k == "calls" {
			continue
		}
		if !reflect.DeepEqual(got[k], want) {
			t.Errorf("%s = %#v, want %#v (result %s)", k, got[k], want, b)
		}
	}
	if _, ok := expect["state"]; !ok {
		t.Errorf("case names no state")
	}
	noSecret(t, "result", string(b))
}

// TestEVMScenarios runs testdata/evm: exact, overpaid, underpaid, wrong
// recipient, wrong token contract, several logs, native coin, reverted,
// missing, indexing in progress, not enough confirmations.
func TestEVMScenarios(t *testing.T) { runScenarios(t, "evm") }
