package rail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
)

// Set is the rails of one process, by chain, with the token registry and
// the configured wallets. It is read-only after Open and safe for
// concurrent use.
type Set struct {
	rails    map[string]Rail
	registry *Registry
	cfg      *Config
}

// Rail returns the rail serving chain, if any. A payment on a chain with
// no rail stays unverified.
func (s *Set) Rail(chain string) (Rail, bool) {
	if s == nil {
		return nil, false
	}
	r, ok := s.rails[chain]
	return r, ok
}

// Chains lists the chains with a rail, sorted.
func (s *Set) Chains() []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.rails))
	for c := range s.rails {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Registry is the token registry (built-ins and --token additions).
func (s *Set) Registry() *Registry { return s.registry }

// Wallets is our configured receiving addresses on chain (--wallet); the
// runner adds the ones published in the thread.
func (s *Set) Wallets(chain string) []string {
	if s == nil || s.cfg == nil {
		return nil
	}
	return s.cfg.WalletsFor(chain)
}

// Depth is the confirmations required on chain.
func (s *Set) Depth(chain string) Confirmations { return s.cfg.DepthFor(chain) }

// Open makes a rail per configured endpoint. For an EVM rail it asks the
// node eth_chainId: a known chain name served by a node on another chain
// is refused with a *ChainIDError (Open fails); another name accepts the
// node's id and logs it. A node that cannot be reached now is not fatal
// (a provider's outage must not stop mail): Open logs it, and the rail
// checks the chain id before its first answer, returning the
// *ChainIDError from Check if it is wrong. Endpoint URLs are logged only
// in their Redact form.
func Open(ctx context.Context, cfg *Config, logger *slog.Logger) (*Set, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg, err := NewRegistry(cfg.Tokens)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s := &Set{rails: map[string]Rail{}, registry: reg, cfg: cfg}
	for _, chain := range cfg.Chains() {
		endpoint := cfg.Endpoints[chain]
		c := newClient(endpoint, cfg.Timeout, cfg.MaxResponse)
		depth := cfg.DepthFor(chain)
		switch KindOf(chain) {
		case Solana:
			s.rails[chain] = &solanaRail{chain: chain, c: c, reg: reg, commitment: depth.Commitment}
			logger.Info("rail opened", "chain", chain, "kind", Solana, "url", c.redacted,
				"commitment", depth.Commitment, "wallets", len(cfg.WalletsFor(chain)))
		default:
			r := &evmRail{chain: chain, c: c, reg: reg, depth: depth.Blocks, log: logger}
			if err := r.checkChainID(ctx); err != nil {
				var cid *ChainIDError
				if errors.As(err, &cid) {
					return nil, err
				}
				logger.Warn("rail not reachable at start; its chain id is checked before its first answer",
					"chain", chain, "url", c.redacted, "err", err)
			} else {
				logger.Info("rail opened", "chain", chain, "kind", EVM, "url", c.redacted,
					"chain_id", r.nodeID, "confirmations", depth.Blocks, "wallets", len(cfg.WalletsFor(chain)))
			}
			s.rails[chain] = r
		}
	}
	return s, nil
}

// NewSet makes a Set of the given rails (one per chain) with cfg's
// wallets, tokens and depths, without dialling anything: for tests of
// code that uses a Set, with rails of their own.
func NewSet(cfg *Config, rails ...Rail) (*Set, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	reg, err := NewRegistry(cfg.Tokens)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s := &Set{rails: map[string]Rail{}, registry: reg, cfg: cfg}
	for _, r := range rails {
		if _, dup := s.rails[r.Chain()]; dup {
			return nil, fmt.Errorf("%w: two rails for %s", ErrConfig, r.Chain())
		}
		s.rails[r.Chain()] = r
	}
	return s, nil
}
