package mailout

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols"
)

// replyCase answers the stored .eml Orig with a Type reply (or, with
// OOPSCode, a courtesy OOPS from ComposeOOPS) and says what the composed
// reply must read back as.
type replyCase struct {
	Orig     string          `json:"orig"`
	Type     string          `json:"type"`
	Body     json.RawMessage `json:"body"`
	OOPSCode string          `json:"oops_code"`
	OOPSNote string          `json:"oops_note"`
	OOPSFrom string          `json:"oops_from"`

	To            string         `json:"to"`
	From          string         `json:"from"`
	Subject       string         `json:"subject"`
	InReplyTo     string         `json:"in_reply_to"`
	References    []string       `json:"references"`
	AutoSubmitted string         `json:"auto_submitted"`
	Fields        map[string]any `json:"fields"` // body fields that must hold these values
}

func TestReply(t *testing.T) {
	files, _ := filepath.Glob("../testdata/mailout/reply/*.json")
	if len(files) == 0 {
		t.Fatal("no test cases")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			var tc replyCase
			loadJSON(t, f, &tc)
			origRaw, err := os.ReadFile(filepath.Join(filepath.Dir(f), tc.Orig))
			if err != nil {
				t.Fatal(err)
			}
			orig := parse.Parse(origRaw, parse.Options{})
			if !orig.Valid {
				t.Fatalf("original is invalid: %v", orig.Errors)
			}
			var raw []byte
			if tc.OOPSCode != "" {
				raw, err = ComposeOOPS(orig, protocols.Code(tc.OOPSCode), tc.OOPSNote, tc.OOPSFrom)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				d, err := ReplyDraft(orig, tc.Type, tc.Body)
				if err != nil {
					t.Fatal(err)
				}
				if d.From == nil || d.From.Address != tc.From {
					t.Errorf("From %v, want %s", d.From, tc.From)
				}
				raw, err = Compose(d)
				if err != nil {
					t.Fatal(err)
				}
			}
			r := parse.Parse(raw, parse.Options{})
			if !r.Valid {
				t.Fatalf("reply invalid: %v\n%s", r.Errors, raw)
			}
			if r.Type != strings.ToLower(tc.Type) {
				t.Errorf("type %q", r.Type)
			}
			if !slices.Equal(r.To, []string{tc.To}) || !slices.Equal(r.From, []string{tc.From}) {
				t.Errorf("From %v To %v, want %s → %s", r.From, r.To, tc.From, tc.To)
			}
			if !slices.Equal(r.InReplyTo, []string{tc.InReplyTo}) {
				t.Errorf("In-Reply-To %v, want %s", r.InReplyTo, tc.InReplyTo)
			}
			if !slices.Equal(r.References, tc.References) {
				t.Errorf("References %v, want %v", r.References, tc.References)
			}
			if tc.Subject != "" && r.Subject != tc.Subject {
				t.Errorf("Subject %q, want %q", r.Subject, tc.Subject)
			}
			if got := headerValue(raw, "Auto-Submitted"); got != tc.AutoSubmitted {
				t.Errorf("Auto-Submitted %q, want %q", got, tc.AutoSubmitted)
			}
			var body map[string]any
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.Fields {
				got := body[k]
				if wm, ok := want.(map[string]any); ok {
					// An object: only the listed keys must match.
					gm, _ := got.(map[string]any)
					for kk, wv := range wm {
						if !reflect.DeepEqual(gm[kk], wv) {
							t.Errorf("body %s.%s = %v, want %v", k, kk, gm[kk], wv)
						}
					}
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("body %s = %v, want %v", k, got, want)
				}
			}
		})
	}
}

// headerValue returns the first value of a top-level header field.
func headerValue(raw []byte, name string) string {
	head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	for _, l := range strings.Split(head, "\r\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func TestReplyDraftNoSender(t *testing.T) {
	if _, err := ReplyDraft(&parse.Result{Type: "order"}, "fulfill", nil); err != ErrNoSender {
		t.Errorf("got %v, want ErrNoSender", err)
	}
}
