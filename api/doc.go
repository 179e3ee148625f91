// Package api serves an AgentMail-compatible HTTP API from
// envelopd's own store, so that an agent built on AgentMail's official
// SDK (agentmail@0.5.27: its api/resources clients and serialization/
// wire names are the contract) runs against envelopd by changing only its
// base URL, and sees envelopd's verdicts on every message (DKIM,
// Envelopay validation, proof dedup) in the extension object envelopay.
//
// Service is the query/command layer over the store (one method per
// operation, taking the authenticated Principal); Handler decodes
// requests and encodes answers under /v0. Authentication is a Bearer API
// key (RFC 6750 §2.1) checked in constant time against its SHA-256 (issue
// 22; keys.go); each route needs one of the key's per-operation
// permissions, named in one table (permissions.go). Lists page by keyset (page tokens name the last row),
// never by OFFSET. docs/api.md lists the endpoints served and those that
// answer 501.
package api
