package tunnel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"path"
	"strings"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/a2a"
	"github.com/envelopd/envelopd/protocols/aicp"
	"github.com/envelopd/envelopd/protocols/pvp"
	"github.com/envelopd/envelopd/protocols/vacant"
	"github.com/envelopd/envelopd/protocols/vcp"
)

// Protocol names, as in protocols.Report.Protocol.
const (
	VCP    = "vcp"
	Vacant = "vacant"
	A2A    = "a2a"
	AICP   = "aicp"
	PVP    = "pvp"
)

// Options are what inspection needs from outside the part.
type Options struct {
	// AICPKeys maps an AICP handle to its raw 32-byte Ed25519 public key
	// (aicp.ParseKey).
	AICPKeys map[string][]byte
	// Now is the receipt time for AICP's timestamp window; zero means the
	// current time.
	Now time.Time
}

// IsJSONPart reports whether a MIME part is JSON and is to be inspected:
// media type application/json or application/*+json (parameters and case
// ignored), or a file name ending in ".json".
func IsJSONPart(contentType, filename string) bool {
	if mt := mediaType(contentType); mt == "application/json" ||
		(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return true
	}
	return strings.EqualFold(path.Ext(filename), ".json")
}

// Inspect recognises and validates one JSON part. filename is not used for
// detection (IsJSONPart decides whether a part is inspected at all); it is
// taken so that callers pass what they have.
func Inspect(data []byte, contentType, filename string, opts Options) protocols.Report {
	v, err := decode(data)
	if err != nil {
		return protocols.Report{
			Errors:  protocols.Problems{protocols.New(protocols.CodeInvalidJSON, "", "%s: %v", partName(filename), err)},
			Summary: map[string]any{},
		}
	}
	proto := Detect(v)
	if proto == "" {
		proto = hinted(contentType)
	}
	if proto == "" {
		return protocols.Report{Valid: true, Errors: protocols.Problems{}, Summary: map[string]any{}}
	}
	r := validate(proto, data, opts)
	if r.Errors == nil {
		r.Errors = protocols.Problems{}
	}
	if r.Summary == nil {
		r.Summary = map[string]any{}
	}
	return r
}

// validate hands the part to its protocol's validator.
func validate(proto string, data []byte, opts Options) protocols.Report {
	switch proto {
	case VCP:
		return vcp.Validate(data)
	case PVP:
		return pvp.Validate(data)
	case AICP:
		return aicp.Validate(data, aicp.Options{Keys: opts.AICPKeys, Now: opts.Now})
	case Vacant:
		return vacant.Validate(data)
	case A2A:
		return a2a.Validate(data)
	}
	return protocols.Report{Protocol: proto, Errors: protocols.Problems{
		protocols.New(protocols.CodeInvalidField, "", "no validator for protocol %q", proto)}}
}

// MediaType returns the media type to label a part with (envelopd compose
// --attach), by content: application/vcp+json, application/aicp+json,
// application/a2a+json (Vacant and plain A2A alike, the MailA2A
// convention), application/pvp+json, or application/json for anything
// else, including data that is not JSON.
func MediaType(data []byte) string {
	v, err := decode(data)
	if err != nil {
		return "application/json"
	}
	switch Detect(v) {
	case VCP:
		return "application/vcp+json"
	case AICP:
		return "application/aicp+json"
	case Vacant, A2A:
		return "application/a2a+json"
	case PVP:
		return "application/pvp+json"
	}
	return "application/json"
}

// Detect applies the detection rules of the package doc to a decoded JSON
// value and returns the protocol name, or "" for none.
func Detect(v any) string {
	obj, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	has := func(k string) bool { _, ok := obj[k]; return ok }
	if obj["protocol"] == "vcp" {
		return VCP
	}
	if vacant.IsVacant(obj) {
		return Vacant
	}
	if a2a.IsSend(obj) {
		return A2A
	}
	if has("v") && has("nonce") && (isString(obj["from"]) || isString(obj["to"])) {
		return AICP
	}
	if has("v") && has("session") && has("sender") && has("type") {
		return PVP
	}
	return ""
}

// hinted maps a protocol media type to its protocol, "" for others.
func hinted(contentType string) string {
	switch mediaType(contentType) {
	case "application/vcp+json":
		return VCP
	case "application/aicp+json":
		return AICP
	case "application/a2a+json":
		return A2A
	case "application/pvp+json":
		return PVP
	}
	return ""
}

func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		// A malformed parameter list still names its type.
		mt, _, _ = strings.Cut(contentType, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

func partName(filename string) string {
	if filename == "" {
		return "JSON part"
	}
	return filename
}

// decode parses leniently for detection (duplicate keys allowed, as
// JSON.parse and json.loads allow them); one value only, a leading UTF-8
// byte order mark skipped.
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty document")
		}
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}
