package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/envelopd/envelopd/protocols/envelopay"
	"github.com/envelopd/envelopd/store"
)

// Allowed flag values: a value outside the set is a usage error naming the
// set, never a silent empty answer.
var (
	statusValues    = []string{store.StatusAccepted, store.StatusQuarantined, store.StatusDuplicate}
	directionValues = []string{store.DirIn, store.DirOut}
	queueStates     = []string{store.QueuePending, store.QueueSent, store.QueueFailed, store.QueueDropped}
)

// oneOf checks a flag value against its allowed set, case-insensitively,
// and returns it in lower case; "" (not given) is always allowed.
func oneOf(e *env, cmd, name, v string, allowed []string) (string, bool) {
	l := strings.ToLower(strings.TrimSpace(v))
	if l == "" || slices.Contains(allowed, l) {
		return l, true
	}
	fmt.Fprintf(e.stderr, "envelopd %s: --%s %q: want one of %s\n", cmd, name, v, strings.Join(allowed, ", "))
	return "", false
}

// filterFlags are the message filters inbox and watch share.
type filterFlags struct {
	f store.Filter
}

func (ff *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&ff.f.Type, "type", "", "only this Envelopay type ("+strings.Join(envelopay.Types, ", ")+"; any case)")
	fs.StringVar(&ff.f.Status, "status", "", "only this status ("+strings.Join(statusValues, ", ")+")")
	fs.StringVar(&ff.f.Direction, "direction", "", "only this direction (in: received, out: sent)")
	fs.StringVar(&ff.f.Mailbox, "mailbox", "", "only this mailbox (relay mode)")
}

// check validates and normalises the values given.
func (ff *filterFlags) check(e *env, cmd string) bool {
	var ok bool
	if ff.f.Type, ok = oneOf(e, cmd, "type", ff.f.Type, envelopay.Types); !ok {
		return false
	}
	if ff.f.Status, ok = oneOf(e, cmd, "status", ff.f.Status, statusValues); !ok {
		return false
	}
	if ff.f.Direction, ok = oneOf(e, cmd, "direction", ff.f.Direction, directionValues); !ok {
		return false
	}
	ff.f.Mailbox = strings.ToLower(strings.TrimSpace(ff.f.Mailbox))
	return true
}

// noArgs reports an unexpected positional argument (commands that take
// none).
func noArgs(e *env, cmd string, pos []string) bool {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "envelopd %s: unexpected argument %q\n", cmd, pos[0])
		return false
	}
	return true
}
