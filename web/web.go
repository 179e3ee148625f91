package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every web inbox response: only
// this origin's scripts, styles, images and connections (the API and its
// websocket), no plugins, no <base>, no framing by others.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// assets are the files served, by URL path.
var assets = map[string]string{
	"/":                 "static/index.html",
	"/index.html":       "static/index.html",
	"/assets/app.js":    "static/app.js",
	"/assets/view.js":   "static/view.js",
	"/assets/style.css": "static/style.css",
	"/assets/icon.svg":  "static/icon.svg",
}

var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// SetHeaders sets the security headers of a web inbox response.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-cache")
}

// Handler serves the web inbox's page and assets (GET and HEAD only);
// any other path is 404.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetHeaders(w.Header())
		name, ok := assets[r.URL.Path]
		if !ok {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		b, err := fs.ReadFile(static, name)
		if err != nil {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", types[path.Ext(name)])
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(b)
		}
	})
}

// Mount returns a handler that sends /v0 and everything under it to api
// and every other path to the web inbox.
func Mount(api http.Handler) http.Handler {
	ui := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v0" || strings.HasPrefix(r.URL.Path, "/v0/") {
			api.ServeHTTP(w, r)
			return
		}
		ui.ServeHTTP(w, r)
	})
}

// Explorers are the block explorers the web inbox links a payment's
// transaction to, by chain ({tx} is replaced by the transaction hash);
// serve's --explorer replaces or adds one.
var Explorers = map[string]string{
	"ethereum":      "https://etherscan.io/tx/{tx}",
	"sepolia":       "https://sepolia.etherscan.io/tx/{tx}",
	"base":          "https://basescan.org/tx/{tx}",
	"base-sepolia":  "https://sepolia.basescan.org/tx/{tx}",
	"polygon":       "https://polygonscan.com/tx/{tx}",
	"arbitrum":      "https://arbiscan.io/tx/{tx}",
	"optimism":      "https://optimistic.etherscan.io/tx/{tx}",
	"solana":        "https://explorer.solana.com/tx/{tx}",
	"solana-devnet": "https://explorer.solana.com/tx/{tx}?cluster=devnet",
}
