// Package webhook posts a JSON payload to a webhook receiver, the one HTTP
// exchange the hand-off (--webhook) and the API's webhooks share; each
// signs the payload in its own headers.
package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// drainLimit bounds what is read of a receiver's answer (read so that the
// connection can be reused, then dropped).
const drainLimit = 64 << 10

// Post sends body to url with the header fields of header, then
// Content-Type application/json and User-Agent envelopd (which header
// cannot override), reads and drops at most 64 KiB of the
// answer and returns its HTTP status code. The error is the one that kept
// the request from an answer (a bad URL, the connection, ctx).
func Post(ctx context.Context, client *http.Client, url string, body []byte, header map[string]string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "envelopd")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	resp.Body.Close()
	return resp.StatusCode, nil
}
