package mailin

import (
	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// Replies of --dmarc-enforce (RFC 7489 §6.6.4, §10.3; RFC 7372 §3.1's
// enhanced codes are not DMARC-specific, 5.7.1 is what receivers use).
var (
	ErrDMARCReject = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1},
		Message: "Rejected by the From domain's DMARC policy (p=reject): no aligned SPF or DKIM pass"}
	ErrDMARCTemp = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1},
		Message: "DMARC could not be evaluated now (DNS temporary failure); try again later"}
)

// CodeDMARCFailed is the error a message quarantined by its From domain's
// DMARC policy carries (--dmarc-enforce).
const CodeDMARCFailed protocols.Code = "dmarc_failed"

// enforceDMARC applies --dmarc-enforce to a prepared message: an error
// for SMTP to answer (the message is not stored), or nil, with in
// quarantined when the policy asks for it. A message a trusted ARC sealer
// vouches for passes (its authenticated_as is set).
func (p *Pipeline) enforceDMARC(a *message.Analysis, in *store.Incoming, meta Meta) error {
	v := a.Sender
	if !p.DMARCEnforce || v == nil || v.AuthenticatedAs != "" {
		return nil
	}
	smtpIn := meta.Source == "smtp"
	switch d := v.DMARC; {
	case d.Result == senderauth.Fail && d.Disposition == "reject" && smtpIn:
		return ErrDMARCReject
	case d.Result == senderauth.TempError && (d.Policy == "reject" || d.Policy == "") && smtpIn:
		return ErrDMARCTemp
	case d.Result == senderauth.Fail && (d.Disposition == "reject" || d.Disposition == "quarantine"):
		in.Errors = append(in.Errors, protocols.New(CodeDMARCFailed, "",
			"the From domain %s fails DMARC and its policy asks for %s: no aligned SPF or DKIM pass", d.Domain, d.Disposition))
		in.Status = store.StatusQuarantined
	}
	return nil
}
