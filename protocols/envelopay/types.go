package envelopay

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
)

// Version is the protocol version this package implements and writes in "v".
const Version = "0.2.0"

// Types are the nine message types in the spec's order ("Nine message
// types"), lower case as in the JSON "type" field.
var Types = []string{"which", "methods", "pay", "order", "fulfill", "invoice", "offer", "accept", "oops"}

// Keywords are the nine subject keywords, in the same order as Types.
var Keywords = []string{"WHICH", "METHODS", "PAY", "ORDER", "FULFILL", "INVOICE", "OFFER", "ACCEPT", "OOPS"}

// RefFields are the fields by which a message references an earlier one by
// id ("Identifiers": typed refs, and OOPS's generic ref).
var RefFields = []string{"order_ref", "invoice_ref", "offer_ref", "which_ref", "ref"}

// IsType reports whether typ is one of the nine lower-case types.
func IsType(typ string) bool {
	return slices.Contains(Types, typ)
}

// IDPrefix returns the conventional id prefix for a type, as used by the
// spec's examples ("wch_1a2b", "oops_0i1j"), or "" for an unknown type.
func IDPrefix(typ string) string {
	switch typ {
	case "which":
		return "wch_"
	case "methods":
		return "mth_"
	case "pay":
		return "pay_"
	case "order":
		return "ord_"
	case "fulfill":
		return "ful_"
	case "invoice":
		return "inv_"
	case "offer":
		return "ofr_"
	case "accept":
		return "acc_"
	case "oops":
		return "oops_"
	}
	return ""
}

// NewID returns a fresh id for a message of type typ: IDPrefix(typ) followed
// by 16 hex digits from crypto/rand. Ids are opaque to the protocol
// ("Identifiers"); the prefix only helps people reading mail.
func NewID(typ string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return IDPrefix(typ) + hex.EncodeToString(b[:])
}
