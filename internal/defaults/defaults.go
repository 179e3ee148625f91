// Package defaults fills the unset numbers of a configuration: zero (or a
// negative number, which no option means) takes the default.
package defaults

import "cmp"

// Positive sets *v to def when *v is not positive: an unset count,
// size or duration takes its default.
func Positive[T cmp.Ordered](v *T, def T) {
	var zero T
	if *v <= zero {
		*v = def
	}
}
