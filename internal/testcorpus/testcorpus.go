// Package testcorpus runs file-based test corpora in the manner of
// chasquid's test vectors: a new case is a new pair of files, not new code.
//
// Each input file matched by a glob (NAME.EXT) has a NAME.want beside it:
// either the exact expected rendering of the parsed input, or a single
// line "error TEXT", meaning that parsing must fail with an error that
// wraps the package's sentinel error and contains TEXT.
package testcorpus

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Run runs one subtest per input matched by glob. parse turns the input
// into its rendering (compared with NAME.want byte for byte) or fails with
// an error that must wrap sentinel. An empty corpus fails the test.
func Run(t *testing.T, glob string, sentinel error, parse func(in []byte) (string, error)) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases match %s: %v", glob, err)
	}
	for _, file := range files {
		ext := filepath.Ext(file)
		t.Run(strings.TrimSuffix(filepath.Base(file), ext), func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(file, ext) + ".want")
			if err != nil {
				t.Fatal(err)
			}
			got, err := parse(in)
			if w, ok := strings.CutPrefix(strings.TrimSpace(string(want)), "error "); ok {
				if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), w) {
					t.Fatalf("error %v, want %v containing %q", err, sentinel, w)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}
