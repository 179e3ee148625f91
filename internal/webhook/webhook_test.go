package webhook

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPost(t *testing.T) {
	t.Parallel()
	type got struct {
		method, ctype, agent, sig, body string
	}
	seen := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{r.Method, r.Header.Get("Content-Type"), r.Header.Get("User-Agent"), r.Header.Get("X-Sig"), string(b)}
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, strings.Repeat("x", 100<<10)) // more than is read
	}))
	defer srv.Close()
	code, err := Post(context.Background(), srv.Client(), srv.URL, []byte(`{"a":1}`), map[string]string{"X-Sig": "s"})
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("Post = %d, %v; want 202, nil", code, err)
	}
	want := got{"POST", "application/json", "envelopd", "s", `{"a":1}`}
	if g := <-seen; g != want {
		t.Errorf("receiver saw %+v, want %+v", g, want)
	}
}

func TestPostErrors(t *testing.T) {
	t.Parallel()
	if _, err := Post(context.Background(), http.DefaultClient, "::bad", nil, nil); err == nil {
		t.Error("a bad URL: no error")
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if _, err := Post(context.Background(), http.DefaultClient, url, nil, nil); err == nil {
		t.Error("a closed server: no error")
	}
	srv = httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if code, err := Post(context.Background(), srv.Client(), srv.URL, nil, nil); err != nil || code != http.StatusNotFound {
		t.Errorf("404: Post = %d, %v", code, err)
	}
}
