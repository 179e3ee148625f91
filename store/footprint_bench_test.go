package store_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
)

// footprintMail is a real-shaped received mail of about size bytes:
// trace and DKIM headers, a quoted-printable text part, an HTML part,
// and (from 1 KB) a small base64 attachment; n makes it unique.
func footprintMail(n, size int) []byte {
	var b strings.Builder
	if size >= 1000 {
		fmt.Fprintf(&b, "Received: from mx%d.buyer.test (mx%d.buyer.test [192.0.2.%d])\r\n\tby mx.shop.test with ESMTPS id %08x\r\n\tfor <agent@shop.test>; Fri, 27 Nov 2026 10:%02d:%02d +0000\r\n",
			n%7, n%7, n%250, n*2654435761, n%60, n%59)
		fmt.Fprintf(&b, "DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=buyer.test; s=sel%d;\r\n\th=from:to:subject:date:message-id; bh=%s;\r\n\tb=%s\r\n",
			n%3, base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%032x", n*7919)))[:43]+"=",
			base64.StdEncoding.EncodeToString([]byte(strings.Repeat(fmt.Sprintf("%016x", n*104729), 16)))[:342])
	}
	fmt.Fprintf(&b, "From: Buyer %d <buyer%d@buyer.test>\r\nTo: agent@shop.test\r\nSubject: Order %d: question about delivery\r\n"+
		"Date: Fri, 27 Nov 2026 10:%02d:%02d +0000\r\nMessage-ID: <fp%d.%d@buyer.test>\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n", n%100, n%100, n, n%60, n%59, n, size, n)
	text := fmt.Sprintf("Hello, order %d: when does it ship? I paid =E2=82=AC%d.%02d.", n, n%500, n%100)
	fmt.Fprintf(&b, "--b%d\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n%s\r\n", n, text)
	fmt.Fprintf(&b, "--b%d\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Order %d: when does it ship?</p>\r\n", n, n)
	{
		body := []byte(fmt.Sprintf(`{"order":%d,"sku":"A-%d","qty":%d}`, n, n%97, n%5+1))
		if size >= 1000 {
			body = []byte(fmt.Sprintf(`{"order":%d,"items":[{"sku":"A-%d","qty":%d}],"note":"%s"}`, n, n%97, n%5+1, strings.Repeat("please deliver to the back door ", 4)))
		}
		fmt.Fprintf(&b, "--b%d\r\nContent-Type: application/json; name=\"o.json\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", n)
		enc := base64.StdEncoding.EncodeToString(body)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	}
	for b.Len() < size-20 {
		fmt.Fprintf(&b, "<p>Line %d of the quoted conversation, kept by the mail client below the reply.</p>\r\n", b.Len())
	}
	fmt.Fprintf(&b, "--b%d--\r\n", n)
	return []byte(b.String())
}

// BenchmarkFootprint stores b.N real-shaped mails of about 2.5 KB and
// 600 bytes, analysed as mailin analyses them, into a fresh SQLite store
// and reports the file's bytes per mail (disk-B/mail, the file and its
// WAL after Close) and their ratio to the raw bytes (disk/raw): run with
// -benchtime=20000x.
func BenchmarkFootprint(b *testing.B) {
	footprint(b, func(b *testing.B) (store.Store, func() int64) {
		path := filepath.Join(b.TempDir(), "fp.db")
		s, err := store.OpenSQLite(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		return s, func() int64 {
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			var disk int64
			for _, f := range []string{path, path + "-wal"} {
				if fi, err := os.Stat(f); err == nil {
					disk += fi.Size()
				}
			}
			return disk
		}
	})
}

// BenchmarkPostgresFootprint is BenchmarkFootprint on Postgres
// (ENVELOPD_PG_DSN or a throwaway server): the bytes of every table of
// the store's schema with its indexes and TOAST.
func BenchmarkPostgresFootprint(b *testing.B) {
	footprint(b, func(b *testing.B) (store.Store, func() int64) {
		dsn := pgtest.Schema(b)
		s, err := store.OpenPostgres(context.Background(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		return s, func() int64 {
			defer s.Close()
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var disk int64
			if err := db.QueryRow(`SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
				JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'`).Scan(&disk); err != nil {
				b.Fatal(err)
			}
			if b.N >= 1000 {
				pgFootprintBreakdown(b, db)
			}
			return disk
		}
	})
}

// pgFootprintBreakdown logs the bytes per mail of each relation of the
// store's schema that holds any (a table's heap with its TOAST, each
// index apart), largest first: where a mail's bytes go (-v).
func pgFootprintBreakdown(b *testing.B, db *sql.DB) {
	rows, err := db.Query(`SELECT c.relname, c.relkind::text,
			CASE c.relkind WHEN 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i') ORDER BY 3 DESC`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out strings.Builder
	for rows.Next() {
		var name, kind string
		var size int64
		if err := rows.Scan(&name, &kind, &size); err != nil {
			b.Fatal(err)
		}
		if size > 8192 {
			fmt.Fprintf(&out, "\n\t%-32s %s %8.1f B/mail", name, kind, float64(size)/float64(b.N))
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	b.Logf("per relation (r: heap and TOAST, i: index):%s", out.String())
}

// footprint runs the footprint benchmark over the stores open makes; the
// function it returns ends the store and gives its bytes on disk.
func footprint(b *testing.B, open func(b *testing.B) (store.Store, func() int64)) {
	for _, size := range []int{2500, 600} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			ctx := context.Background()
			s, done := open(b)
			ins := make([]*store.Incoming, b.N)
			var raw int64
			for i := range ins {
				m := footprintMail(i, size)
				raw += int64(len(m))
				in := message.Incoming(message.Analyze(ctx, m, message.AnalyzeOptions{}), m, store.DirIn)
				in.ReceivedAt = time.Now()
				in.Recipients = []string{"agent@shop.test"}
				ins[i] = in
			}
			b.ResetTimer()
			for _, in := range ins {
				if _, err := s.Ingest(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			disk := done()
			b.ReportMetric(float64(raw)/float64(b.N), "raw-B/mail")
			b.ReportMetric(float64(disk)/float64(b.N), "disk-B/mail")
			b.ReportMetric(float64(disk)/float64(raw), "disk/raw")
		})
	}
}
