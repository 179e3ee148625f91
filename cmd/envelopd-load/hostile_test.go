package main

import (
	"context"
	"io"
	"os"
	"testing"
)

func TestParseVmHWM(t *testing.T) {
	t.Parallel()
	got, err := parseVmHWM("Name:\tenvelopd\nVmPeak:\t  912 kB\nVmHWM:\t   20480 kB\nVmRSS:\t 100 kB\n")
	if err != nil || got != 20480*1024 {
		t.Fatalf("got %d, %v", got, err)
	}
	if _, err := parseVmHWM("Name:\tx\n"); err == nil {
		t.Fatal("no VmHWM line: no error")
	}
	// This process has a peak RSS, and /proc says so.
	if n, err := vmHWM(os.Getpid()); err != nil || n <= 0 {
		t.Fatalf("own VmHWM: %d, %v", n, err)
	}
}

// TestHostileSmall runs `envelopd-load hostile`'s plumbing end to end on
// small shapes against a real envelopd serve: every mail is answered 250,
// every case has its peak RSS and times, the ratios are against the
// baseline, and the nested-JSON parse output stays within 4× + 64 KiB.
func TestHostileSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs envelopd")
	}
	dir := t.TempDir()
	bin := buildEnvelopd(t, dir)
	f := hostileFlags{bin: bin, parts: 300, nested: 3000, large: 200_000, concurrent: 3, work: dir}
	cases, err := Hostile(context.Background(), f, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"baseline-2kb", "many-parts", "nested-json", "concurrent-large"}
	if len(cases) != len(want) {
		t.Fatalf("%d cases", len(cases))
	}
	for i, c := range cases {
		if c.Name != want[i] || c.Accepted != c.Mails || c.Busy != 0 || c.OtherReply != "" {
			t.Errorf("%s: %d/%d accepted, %d busy, %q", c.Name, c.Accepted, c.Mails, c.Busy, c.OtherReply)
		}
		if c.ServeHWM <= 0 || c.ParseHWM <= 0 || c.InboxHWM <= 0 || c.StoreSec <= 0 || c.InboxBytes == 0 || c.ParseBytes == 0 || c.DBBytes <= 0 {
			t.Errorf("%s: a measurement is missing: %+v", c.Name, c)
		}
		if c.ParseBytes > 4*c.MailBytes+64<<10 {
			t.Errorf("%s: parse printed %d bytes for %d", c.Name, c.ParseBytes, c.MailBytes)
		}
		if (i == 0) != (c.RSSRatio == 0) {
			t.Errorf("%s: rss ratio %v", c.Name, c.RSSRatio)
		}
	}
	if cases[3].Mails != 3 || cases[3].MailBytes < 200_000 {
		t.Errorf("large case: %+v", cases[3])
	}
}
