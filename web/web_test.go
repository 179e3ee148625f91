package web_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/web"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

// TestHandler: the page and its assets with their types; everything
// else 404; only GET and HEAD; every answer with the security headers.
func TestHandler(t *testing.T) {
	t.Parallel()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := web.Mount(api)
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/", 200, "text/html; charset=utf-8"},
		{"GET", "/index.html", 200, "text/html; charset=utf-8"},
		{"GET", "/assets/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/assets/view.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/assets/style.css", 200, "text/css; charset=utf-8"},
		{"GET", "/assets/icon.svg", 200, "image/svg+xml"},
		{"GET", "/assets/", 404, ""},
		{"GET", "/assets/../web.go", 404, ""},
		{"GET", "/static/index.html", 404, ""},
		{"GET", "/favicon.ico", 404, ""},
		{"POST", "/", 405, ""},
		{"GET", "/v0", 418, ""},
		{"GET", "/v0/inboxes", 418, ""},
		{"GET", "/v0x", 404, ""},
	} {
		resp := get(t, h, tc.method, tc.path)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
		if tc.ctype != "" && resp.Header.Get("Content-Type") != tc.ctype {
			t.Errorf("%s %s: Content-Type %q, want %q", tc.method, tc.path, resp.Header.Get("Content-Type"), tc.ctype)
		}
		if tc.status == 418 {
			continue // the API's own answer
		}
		for k, v := range map[string]string{
			"Content-Security-Policy": web.CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
			"Referrer-Policy": "no-referrer", "Cache-Control": "no-cache",
		} {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s %s: %s %q, want %q", tc.method, tc.path, k, got, v)
			}
		}
		body, _ := io.ReadAll(resp.Body)
		if tc.method == "HEAD" && len(body) != 0 {
			t.Errorf("HEAD %s: %d bytes of body", tc.path, len(body))
		}
	}
}

// TestCSP: the policy names no third-party origin and allows no inline
// script or style, no eval, no plugins, no framing.
func TestCSP(t *testing.T) {
	t.Parallel()
	dirs := map[string]string{}
	for _, d := range strings.Split(web.CSP, ";") {
		f := strings.Fields(d)
		if len(f) > 0 {
			dirs[f[0]] = strings.Join(f[1:], " ")
		}
	}
	want := map[string]string{
		"default-src": "'self'", "script-src": "'self'", "style-src": "'self'", "connect-src": "'self'",
		"object-src": "'none'", "base-uri": "'none'", "frame-ancestors": "'none'",
	}
	for k, v := range want {
		if dirs[k] != v {
			t.Errorf("CSP %s %q, want %q", k, dirs[k], v)
		}
	}
	for k, v := range dirs {
		if strings.Contains(v, "unsafe") || strings.Contains(v, "http") || strings.Contains(v, "*") {
			t.Errorf("CSP %s %q allows more than this origin", k, v)
		}
	}
}

// TestStaticFiles: the embedded files hold no inline script or style,
// no third-party URL, and the scripts never write markup (mail is shown
// as text: no innerHTML, outerHTML, insertAdjacentHTML, document.write,
// eval).
func TestStaticFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("static/*")
	if err != nil || len(files) < 4 {
		t.Fatalf("static files: %v %v", files, err)
	}
	inlineScript := regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if regexp.MustCompile(`(?i)https?://`).MatchString(strings.ReplaceAll(s, "http://www.w3.org/2000/svg", "")) {
			t.Errorf("%s names a remote URL", f)
		}
		switch filepath.Ext(f) {
		case ".html", ".svg":
			if inlineScript.MatchString(s) || strings.Contains(s, "<style") || regexp.MustCompile(`\sstyle=`).MatchString(s) ||
				regexp.MustCompile(`(?i)\son[a-z]+=`).MatchString(s) {
				t.Errorf("%s has inline script or style", f)
			}
		case ".js":
			for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", ".style."} {
				if strings.Contains(s, bad) {
					t.Errorf("%s uses %s", f, bad)
				}
			}
		}
	}
	// The iframe for HTML mail: sandboxed without scripts or same-origin,
	// its own CSP forbidding remote loads.
	v, _ := os.ReadFile("static/view.js")
	if !strings.Contains(string(v), `sandbox: ""`) || !strings.Contains(string(v), `default-src 'none'; img-src data:`) {
		t.Errorf("view.js: the HTML iframe is not sandboxed with its own CSP")
	}
	// Every file under static/ is served (nothing dead is embedded).
	h := web.Handler()
	fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if d.IsDir() || p == "index.html" {
			return nil
		}
		if resp := get(t, h, "GET", "/assets/"+p); resp.StatusCode != 200 {
			t.Errorf("static/%s is embedded but not served: %d", p, resp.StatusCode)
		}
		return nil
	})
}
