package vcp

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/internal/jsondoc"
)

// isMoneyKey reports whether a payload member holds money ("Money":
// unit_price, budget, floor_price and ledger deltas are integers; the
// implementation notes add amount and any *_price).
func isMoneyKey(k string) bool {
	switch k {
	case "unit_price", "budget", "floor_price", "amount", "price", "delta", "deltas":
		return true
	}
	return strings.HasSuffix(k, "_price") || strings.HasSuffix(k, "_delta") || strings.HasSuffix(k, "_deltas")
}

// money walks a payload value; under a money key every number must be a
// JSON integer ("a float in a money field is a malformed payload").
func (c *checker) money(v any, path string) {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			p := path + "." + k
			if isMoneyKey(k) {
				c.moneyValue(t[k], p, true)
			} else {
				c.money(t[k], p)
			}
		}
	case []any:
		for i, e := range t {
			c.money(e, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// moneyValue checks the value of a money member. top is true for the
// member itself, where only an integer (or null) is allowed; inside an
// object or array under it, strings (a currency) may sit beside integers.
func (c *checker) moneyValue(v any, path string, top bool) {
	switch t := v.(type) {
	case nil:
	case json.Number:
		if !isInteger(t) {
			c.problems.Add(protocols.CodeInvalidField, path, "%s is %s: money is an integer in minor units, never a float", path, t)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			c.moneyValue(t[k], path+"."+k, false)
		}
	case []any:
		for i, e := range t {
			c.moneyValue(e, fmt.Sprintf("%s[%d]", path, i), false)
		}
	case string:
		if top {
			c.problems.Add(protocols.CodeInvalidField, path, "%s is a string: money is a JSON integer in minor units", path)
		}
	default:
		c.problems.Add(protocols.CodeInvalidField, path, "%s is %s: money is a JSON integer in minor units", path, jsondoc.TypeName(v))
	}
}

// isInteger reports whether a JSON number literal is an integer: no
// fraction and no exponent (Python's json reads 300.0 and 3e2 as floats).
func isInteger(n json.Number) bool {
	return !strings.ContainsAny(string(n), ".eE")
}
