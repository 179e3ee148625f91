package mailin

import (
	"slices"
	"strings"
	"testing"
)

// TestExecEnv: the --exec environment is an allow-list of envelopd's own:
// PATH, HOME, LANG, LC_*, … and the names passed; never
// envelopd's passwords, whatever is asked.
func TestExecEnv(t *testing.T) {
	t.Parallel()
	environ := []string{"PATH=/usr/bin", "HOME=/home/a", "LC_ALL=C", "TZ=UTC", "TERM=xterm",
		"ENVELOPD_SMTP_PASSWORD=s1", "ENVELOPD_IMAP_PASSWORD=s2", "ENVELOPD_DEBUG=1",
		"AWS_SECRET_ACCESS_KEY=s3", "OPENAI_API_KEY=k", "WEIRD"}
	got, err := ExecEnv(environ, []string{"OPENAI_API_KEY"}, []string{"ENVELOPD_DB=/var/lib/envelopd/db"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/usr/bin", "HOME=/home/a", "LC_ALL=C", "TZ=UTC", "OPENAI_API_KEY=k", "ENVELOPD_DB=/var/lib/envelopd/db"}
	if !slices.Equal(got, want) {
		t.Errorf("ExecEnv = %q, want %q", got, want)
	}
	for _, bad := range [][]string{{"ENVELOPD_SMTP_PASSWORD"}, {IMAPPasswordEnv}, {"A=B"}, {""}} {
		if _, err := ExecEnv(environ, bad, nil); err == nil {
			t.Errorf("ExecEnv passed %q", bad)
		} else if strings.Contains(err.Error(), "s1") || strings.Contains(err.Error(), "s2") {
			t.Errorf("the error shows a secret: %v", err)
		}
	}
}
