package tunnel

import "github.com/envelopd/envelopd/protocols"

// pending reports an A2A part while protocols/a2a is not in the tree yet.
// PENDING(issue 9): replace the A2A case in validate with
// a2a.Validate(data) and delete this file.
func pending(proto string) protocols.Report {
	return protocols.Report{
		Protocol: proto,
		Errors: protocols.Problems{protocols.New(protocols.CodeInvalidField, "",
			"%s parts are recognised but their validator is not built into this envelopd yet", proto)},
		Summary: map[string]any{},
	}
}
