package mailout

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/emersion/go-message/mail"
)

// maxLine is the longest line RFC 5322 section 2.1.1 allows, without CRLF.
const maxLine = 998

// writeBody writes the header h and the body: a single text/plain part;
// multipart/alternative with text/html when HTML is asked for; and
// multipart/mixed around it when there are attachments (RFC 2046 sections
// 5.1.3, 5.1.4).
func writeBody(w io.Writer, h mail.Header, d Draft, text string) error {
	var th mail.InlineHeader
	th.Set("Content-Type", "text/plain; charset=utf-8")
	th.Set("Content-Transfer-Encoding", transferEncoding(text))

	if len(d.Attachments) == 0 && d.HTML == "" {
		tw, err := mail.CreateSingleInlineWriter(w, h)
		if err != nil {
			return err
		}
		return writeClose(tw, text)
	}
	if len(d.Attachments) == 0 {
		iw, err := mail.CreateInlineWriter(w, h)
		if err != nil {
			return err
		}
		if err := writeAlternatives(iw, th, text, d.HTML); err != nil {
			return err
		}
		return iw.Close()
	}
	mw, err := mail.CreateWriter(w, h)
	if err != nil {
		return err
	}
	if d.HTML != "" {
		iw, err := mw.CreateInline()
		if err != nil {
			return err
		}
		if err := writeAlternatives(iw, th, text, d.HTML); err != nil {
			return err
		}
		if err := iw.Close(); err != nil {
			return err
		}
	} else {
		tw, err := mw.CreateSingleInline(th)
		if err != nil {
			return err
		}
		if err := writeClose(tw, text); err != nil {
			return err
		}
	}
	for _, a := range d.Attachments {
		var ah mail.AttachmentHeader
		ct := a.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		ah.Set("Content-Type", ct)
		if a.Filename != "" {
			ah.SetFilename(a.Filename)
		}
		aw, err := mw.CreateAttachment(ah)
		if err != nil {
			return err
		}
		if _, err := aw.Write(a.Data); err != nil {
			return err
		}
		if err := aw.Close(); err != nil {
			return err
		}
	}
	return mw.Close()
}

func writeAlternatives(iw *mail.InlineWriter, th mail.InlineHeader, text, html string) error {
	tw, err := iw.CreatePart(th)
	if err != nil {
		return err
	}
	if err := writeClose(tw, text); err != nil {
		return err
	}
	var hh mail.InlineHeader
	hh.Set("Content-Type", "text/html; charset=utf-8")
	hh.Set("Content-Transfer-Encoding", "quoted-printable")
	hw, err := iw.CreatePart(hh)
	if err != nil {
		return err
	}
	return writeClose(hw, crlf(html))
}

func writeClose(wc io.WriteCloser, s string) error {
	if _, err := io.WriteString(wc, s); err != nil {
		wc.Close()
		return err
	}
	return wc.Close()
}

// TextBody is the text/plain content of an Envelopay message: the human
// text, an empty line and the JSON body, with CRLF line ends and a final
// line end.
func TextBody(text string, body json.RawMessage) string {
	text = strings.TrimRight(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var parts []string
	if strings.TrimSpace(text) != "" {
		parts = append(parts, text)
	}
	if body != nil {
		parts = append(parts, string(body))
	}
	return crlf(strings.Join(parts, "\n\n") + "\n")
}

func crlf(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.ReplaceAll(s, "\n", "\r\n")
}

// transferEncoding is 7bit for ASCII text whose lines fit in 998 octets,
// quoted-printable otherwise (RFC 2045 section 6.7).
func transferEncoding(s string) string {
	if !isASCII(s) {
		return "quoted-printable"
	}
	for _, l := range strings.Split(s, "\r\n") {
		if len(l) > maxLine {
			return "quoted-printable"
		}
	}
	return "7bit"
}
