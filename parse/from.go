package parse

// FromAddresses returns the addresses of every From header field of raw
// (RFC 5322 §3.6.2), read as Parse reads them: the domain lower-cased, and
// picked out of the value when it does not parse as an address list. It
// is for callers that must decide on the author before the full parse
// (relay mode's check that mail from a local address was submitted by
// that address): every From field counts, not only the first Parse keeps,
// so that a second field cannot hide a local author.
func FromAddresses(raw []byte) []string {
	h, _, _ := readHeader(raw)
	var out []string
	for _, f := range h {
		if !equalFold(f.name, "from") {
			continue
		}
		list, _ := addressList(f.text())
		out = append(out, list...)
	}
	return out
}
