package main

import (
	"flag"

	"github.com/envelopd/envelopd/parse"
)

// registerLimits adds the analysis limits to fs: serve, poll
// and parse share them. Past a limit the mail is still stored, quarantined
// with the limit's error code.
func registerLimits(fs *flag.FlagSet, l *parse.Limits) {
	fs.IntVar(&l.MaxParts, "max-parts", parse.DefaultMaxParts, "MIME parts analysed per mail (more → too_many_parts)")
	fs.IntVar(&l.MaxAttachments, "max-attachments", parse.DefaultMaxAttachments, "attachments analysed and stored per mail (more → too_many_attachments)")
	fs.IntVar(&l.MaxJSONDepth, "max-json-depth", parse.DefaultMaxJSONDepth, "nesting depth of the JSON body and JSON attachments (deeper → json_too_deep)")
	fs.IntVar(&l.MaxJSONBytes, "max-json-bytes", parse.DefaultMaxJSONBytes, "size of the JSON body and of each JSON attachment (larger → json_too_large)")
	fs.IntVar(&l.MaxOutputBytes, "max-analysis-bytes", parse.DefaultMaxOutputBytes, "analysis output per mail, never more than 4× the mail + 64 KiB (larger → analysis_too_large)")
}
