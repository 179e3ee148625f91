package protocols

// OOPSOwed returns the problem a courtesy OOPS answers (Envelopay v0.2.0,
// "OOPS is a courtesy") for a message of Envelopay type typ with the
// errors errs: the first whose code is in codes. None for an OOPS (never
// answer an OOPS with one), for mail that is not Envelopay unless its
// type is unknown, or when the From header is in doubt (no one to answer
// safely). The store applies it with the final outcome of an ingest;
// parse.OOPSOwed with parse.OOPSCodes previews it.
func OOPSOwed(typ string, errs Problems, codes []Code) (Problem, bool) {
	for _, p := range errs {
		if p.Field == "from" {
			return Problem{}, false
		}
	}
	if typ == "oops" {
		return Problem{}, false
	}
	for _, p := range errs {
		for _, c := range codes {
			if p.Code == c && (typ != "" || c == CodeUnknownType) {
				return p, true
			}
		}
	}
	return Problem{}, false
}
