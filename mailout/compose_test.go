package mailout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-message/mail"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/protocols/envelopay"
)

// draftFile is a Draft as written in testdata/mailout/compose/*.json.
type draftFile struct {
	From        string          `json:"from"`
	To          []string        `json:"to"`
	Cc          []string        `json:"cc"`
	Bcc         []string        `json:"bcc"`
	Type        string          `json:"type"`
	Note        string          `json:"note"`
	Body        json.RawMessage `json:"body"`
	BodyRaw     string          `json:"body_raw"` // a body that is not JSON
	NoJSON      bool            `json:"no_json"`
	Text        string          `json:"text"`
	HTML        string          `json:"html"`
	InReplyTo   string          `json:"in_reply_to"`
	References  []string        `json:"references"`
	Attachments []struct {
		Filename    string `json:"filename"`
		ContentType string `json:"content_type"`
		Data        string `json:"data"`
	} `json:"attachments"`
}

type composeCase struct {
	Draft   draftFile `json:"draft"`
	Subject string    `json:"subject"` // as a receiver decodes it
	Refused []string  `json:"refused"` // problem codes when Compose must refuse
}

func addrs(t *testing.T, l []string) []*mail.Address {
	var out []*mail.Address
	for _, s := range l {
		a, err := parseAddr(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func (f draftFile) draft(t *testing.T) Draft {
	d := Draft{Type: f.Type, Note: f.Note, Body: f.Body, NoJSON: f.NoJSON, Text: f.Text, HTML: f.HTML,
		InReplyTo: f.InReplyTo, References: f.References,
		To: addrs(t, f.To), Cc: addrs(t, f.Cc), Bcc: addrs(t, f.Bcc)}
	if f.From != "" {
		d.From = addrs(t, []string{f.From})[0]
	}
	if f.BodyRaw != "" {
		d.Body = json.RawMessage(f.BodyRaw)
	}
	for _, a := range f.Attachments {
		d.Attachments = append(d.Attachments, Attachment{Filename: a.Filename, ContentType: a.ContentType, Data: []byte(a.Data)})
	}
	return d
}

// testSigners are an Ed25519 and an RSA signer for alice.test & co., made
// once, with the resolver that knows their keys.
var testSigners = sync.OnceValues(func() ([]dkim.Signer, *dkim.StaticResolver) {
	r := dkim.NewStaticResolver()
	var ss []dkim.Signer
	for _, dom := range []string{"alice.test", "codereviews.test", "example.test"} {
		for _, algo := range []string{"ed25519", "rsa"} {
			k, err := dkim.GenerateKey(algo)
			if err != nil {
				panic(err)
			}
			sel := "s" + algo
			line, err := dkim.TXTRecord(dom, sel, k.Public())
			if err != nil {
				panic(err)
			}
			name, txt, _ := strings.Cut(line, " ")
			r.Add(name, txt)
			ss = append(ss, dkim.Signer{Domain: dom, Selector: sel, Key: k})
		}
	}
	return ss, r
})

func signersFor(domain string) []dkim.Signer {
	all, _ := testSigners()
	var out []dkim.Signer
	for _, s := range all {
		if s.Domain == domain {
			out = append(out, s)
		}
	}
	return out
}

func TestComposeRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("../testdata/mailout/compose/*.json")
	if len(files) == 0 {
		t.Fatal("no test cases")
	}
	_, resolver := testSigners()
	verifier := &dkim.Verifier{Resolver: resolver}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			var tc composeCase
			loadJSON(t, f, &tc)
			d := tc.Draft.draft(t)
			msg, err := ComposeMessage(d)
			if len(tc.Refused) > 0 {
				var ce *ComposeError
				if !errors.As(err, &ce) {
					t.Fatalf("want refusal %v, got %v", tc.Refused, err)
				}
				var codes []string
				for _, p := range ce.Problems {
					if !slices.Contains(codes, string(p.Code)) {
						codes = append(codes, string(p.Code))
					}
				}
				if !slices.Equal(codes, tc.Refused) {
					t.Fatalf("refused with %v (%v), want %v", codes, err, tc.Refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			raw := msg.Raw
			checkLines(t, raw)

			r := parse.Parse(raw, parse.Options{})
			if !r.Valid {
				t.Fatalf("parses back invalid: %v\n%s", r.Errors, raw)
			}
			if want := strings.ToLower(tc.Draft.Type); r.Type != want || msg.Type != want {
				t.Errorf("type %q / %q, want %q", r.Type, msg.Type, want)
			}
			if r.Subject != tc.Subject {
				t.Errorf("subject %q, want %q", r.Subject, tc.Subject)
			}
			if r.TypeHeader != strings.ToUpper(tc.Draft.Type) {
				t.Errorf("X-Envelopay-Type %q", r.TypeHeader)
			}
			_, dom, _ := strings.Cut(d.From.Address, "@")
			if r.MessageID != msg.MessageID || !strings.HasSuffix(msg.MessageID, "@"+dom) {
				t.Errorf("Message-ID %q / %q, want one on %s", r.MessageID, msg.MessageID, dom)
			}
			if !bytes.Contains(raw, []byte("\r\nMime-Version: 1.0\r\n")) || !bytes.Contains(raw, []byte("\r\nDate: ")) {
				t.Errorf("no MIME-Version or Date:\n%s", raw)
			}
			if got, want := r.InReplyTo, msgIDs([]string{tc.Draft.InReplyTo}); !slices.Equal(got, want) {
				t.Errorf("In-Reply-To %v, want %v", got, want)
			}
			if got, want := r.References, msgIDs(tc.Draft.References); !slices.Equal(got, want) {
				t.Errorf("References %v, want %v", got, want)
			}
			checkBody(t, tc.Draft, r, msg)
			if len(msg.Body) > maxLine && !bytes.Contains(raw, []byte("Content-Transfer-Encoding: quoted-printable\r\n")) {
				t.Errorf("a %d-octet JSON line is not quoted-printable", len(msg.Body))
			}
			for _, a := range tc.Draft.Attachments {
				if !slices.ContainsFunc(r.Attachments, func(p parse.Attachment) bool {
					return p.Filename == a.Filename && string(p.Data) == a.Data
				}) {
					t.Errorf("attachment %s missing: %+v", a.Filename, r.Attachments)
				}
			}

			signed, err := Sign(raw, signersFor(dom))
			if err != nil {
				t.Fatal(err)
			}
			res, err := verifier.Verify(context.Background(), signed)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 2 || !dkim.AllPass(res) {
				t.Errorf("DKIM: %+v", res)
			}
			if r2 := parse.Parse(signed, parse.Options{}); !r2.Valid || !bytes.Equal(r2.Body, r.Body) {
				t.Errorf("signed message parses differently: %v", r2.Errors)
			}
		})
	}
}

// checkLines asserts CRLF line ends and RFC 5322 section 2.1.1's 998 octets.
func checkLines(t *testing.T, raw []byte) {
	t.Helper()
	if !bytes.HasSuffix(raw, []byte("\r\n")) {
		t.Error("message does not end in CRLF")
	}
	for i, l := range bytes.Split(raw, []byte("\r\n")) {
		if len(l) > maxLine {
			t.Errorf("line %d is %d octets", i+1, len(l))
		}
		if bytes.ContainsAny(l, "\r\n") {
			t.Errorf("line %d has a bare CR or LF", i+1)
		}
	}
}

// checkBody asserts the body parses back byte for byte as composed, and
// is the draft's body with v, type, a generated id and the note filled in.
func checkBody(t *testing.T, df draftFile, r *parse.Result, msg *Message) {
	t.Helper()
	if df.NoJSON {
		if r.Body != nil || msg.Body != nil {
			t.Errorf("body %s, want none", r.Body)
		}
		return
	}
	if !bytes.Equal(r.Body, msg.Body) {
		t.Fatalf("body reads back as\n%s\nwant\n%s", r.Body, msg.Body)
	}
	var got, want map[string]any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	want = map[string]any{}
	if len(df.Body) > 0 {
		if err := json.Unmarshal(df.Body, &want); err != nil {
			t.Fatal(err)
		}
	}
	typ := strings.ToLower(df.Type)
	for k, v := range map[string]any{"v": envelopay.Version, "type": typ, "note": df.Note} {
		if _, ok := want[k]; !ok && v != "" {
			want[k] = v
		}
	}
	if _, ok := want["id"]; !ok {
		id, _ := got["id"].(string)
		if !strings.HasPrefix(id, envelopay.IDPrefix(typ)) || len(id) != len(envelopay.IDPrefix(typ))+16 {
			t.Errorf("generated id %q", id)
		}
		want["id"] = id
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("body %v, want %v", got, want)
	}
}

func TestComposeErrorIs(t *testing.T) {
	_, err := Compose(Draft{From: &mail.Address{Address: "a@x.test"}, To: []*mail.Address{{Address: "b@y.test"}}, Type: "pay"})
	var ce *ComposeError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, ce.Problems[0]) {
		t.Error("errors.Is does not see the problem")
	}
}

// FuzzCompose: whatever the note, text and body, Compose either refuses
// with a *ComposeError or produces a message that parses back valid with
// the same body and no over-long line.
func FuzzCompose(f *testing.F) {
	files, _ := filepath.Glob("../testdata/mailout/compose/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var tc composeCase
		if json.Unmarshal(b, &tc) != nil {
			continue
		}
		body := string(tc.Draft.Body)
		if tc.Draft.BodyRaw != "" {
			body = tc.Draft.BodyRaw
		}
		f.Add(tc.Draft.Type, tc.Draft.Note, tc.Draft.Text, body)
	}
	from := &mail.Address{Address: "alice@alice.test"}
	to := []*mail.Address{{Address: "bob@example.test"}}
	f.Fuzz(func(t *testing.T, typ, note, text, body string) {
		msg, err := ComposeMessage(Draft{From: from, To: to, Type: typ, Note: note, Text: text, Body: json.RawMessage(body)})
		if err != nil {
			var ce *ComposeError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		checkLines(t, msg.Raw)
		r := parse.Parse(msg.Raw, parse.Options{})
		if !r.Valid || !bytes.Equal(r.Body, msg.Body) {
			t.Fatalf("composed message parses back as valid=%v body=%s errors=%v", r.Valid, r.Body, r.Errors)
		}
	})
}
