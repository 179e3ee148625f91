// Package defaults fills the unset fields of a configuration: zero (or,
// with Positive, a negative number, which no option means) takes the
// default.
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

// Unset sets *v to def when *v is the zero value: an unset field takes its
// default, and a negative number (where an option gives it a meaning, such
// as "no limit") is kept.
func Unset[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
