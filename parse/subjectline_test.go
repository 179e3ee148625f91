package parse

import "testing"

func TestSubjectLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text, typ, note, rest string
		ok                    bool
	}{
		{"ORDER | Review PR #417\n{\"type\":\"order\"}", "order", "Review PR #417", "{\"type\":\"order\"}", true},
		{"\r\n  FULFILL  \r\n\r\n{\"type\":\"fulfill\",\"id\":\"f\"}", "fulfill", "", "\r\n{\"type\":\"fulfill\",\"id\":\"f\"}", true},
		{"PAY | 5 SOL\n{\"type\":\"order\"}", "", "", "", false},       // the TYPE disagrees with the JSON
		{"order | x\n{\"type\":\"order\"}", "", "", "", false},         // read strictly: upper case
		{"Re: ORDER | x\n{\"type\":\"order\"}", "", "", "", false},     // no Re: in a body line
		{"REFUND | x\n{\"type\":\"refund\"}", "", "", "", false},       // not one of the nine
		{"ORDER | x\nno JSON here", "", "", "", false},                 // no body
		{"{\"type\":\"order\"}", "", "", "", false},                    // the JSON is the first line
		{"Hello,\nORDER | x\n{\"type\":\"order\"}", "", "", "", false}, // the first line is prose
		{"", "", "", "", false},
	} {
		s, rest, ok := SubjectLine([]byte(tc.text))
		if ok != tc.ok || s.Type != tc.typ || s.Note != tc.note || string(rest) != tc.rest {
			t.Errorf("SubjectLine(%q) = %+v, %q, %v; want %s %q %q %v", tc.text, s, rest, ok, tc.typ, tc.note, tc.rest, tc.ok)
		}
	}
}
