package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/envelopd/envelopd/payments"
	"github.com/envelopd/envelopd/payments/rail"
	"github.com/envelopd/envelopd/store"
)

const paymentsUsage = "usage: envelopd payments [list] [--json] [--state S] [--limit N] | payments check ID [--rail CHAIN=URL --wallet CHAIN=ADDRESS …] | payments collisions [--json]"

// runPayments is `envelopd payments` (docs/payments.md): the payments the
// received proofs made and how far they are verified.
//
//	envelopd payments [list] [--json] [--state S] [--limit N]
//	envelopd payments check ID   # pending and due now: the serving runner checks it
//	envelopd payments check ID --rail … --wallet …   # checked now, here
//	envelopd payments collisions # old messages whose proofs name an earlier one's transaction
//
// Exit status: 0; 1 when check names an unknown or duplicate payment; 2
// usage or I/O.
func runPayments(ctx context.Context, e *env) int {
	c := newStoreCmd(e, "payments")
	asJSON := c.jsonFlag("print one JSON object per payment")
	var f store.PaymentFilter
	c.fs.StringVar(&f.State, "state", "", "only payments in this state: "+strings.Join(store.PaymentStates, ", "))
	c.fs.IntVar(&f.Limit, "limit", 0, "at most this many (0: all)")
	rails := rail.RegisterFlags(c.fs)
	pos, ok := c.parse()
	if !ok || !checkListFlags(e, "payments", &f.State, store.PaymentStates, false, f.Limit) {
		return 2
	}
	verb, id, ok := subcommand(e, "payments", paymentsUsage, "envelopd payments", pos, []string{"list", "collisions"}, []string{"check"})
	if !ok {
		return 2
	}
	return c.withNewStore(ctx, func(st store.DB) int {
		switch verb {
		case "check":
			return checkPayment(ctx, e, st, rails, id, *asJSON)
		case "collisions":
			cs, err := st.ProofCollisions(ctx)
			if err != nil {
				return failed(e, "payments", err)
			}
			return writeList(e, "payments", *asJSON, cs, "MESSAGE\tSAME TRANSACTION AS\tFOUND", func(w io.Writer, c store.ProofCollision) {
				fmt.Fprintf(w, "%d\t%d\t%s\n", c.MessageID, c.KeptID, c.FoundAt.Local().Format(time.DateTime))
			})
		}
		ps, err := st.ListPayments(ctx, f)
		if err != nil {
			return failed(e, "payments", err)
		}
		return writeList(e, "payments", *asJSON, ps, "ID\tSTATE\tCHAIN\tTX\tAMOUNT\tTOKEN\tFROM\tAUTH\tREASON", func(w io.Writer, p store.Payment) {
			auth := "no"
			if p.Authenticated {
				auth = "yes"
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.State, termSafe(p.Chain), termSafe(p.Tx),
				termSafe(p.Amount), termSafe(p.Token), termSafe(p.Sender), auth, termSafe(p.Reason))
		})
	})
}

// checkPayment is `payments check ID`: with rail flags it checks the
// payment now and prints it; without, it makes it pending and due now,
// for the serving runner.
func checkPayment(ctx context.Context, e *env, st payments.Store, rails *rail.Flags, id int64, asJSON bool) int {
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "envelopd payments check %d: %v\n", id, err)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrPaymentFinal) || errors.Is(err, payments.ErrNoRail) {
			return 1
		}
		return 2
	}
	cfg, err := rails.Config()
	if err != nil {
		return failed(e, "payments", err)
	}
	if len(cfg.Chains()) == 0 {
		if err := st.RecheckPayment(ctx, id, time.Now()); err != nil {
			return fail(err)
		}
		fmt.Fprintf(e.stdout, "payment %d: pending, due now (the serving runner checks it)\n", id)
		return 0
	}
	set, err := rail.Open(ctx, cfg, nil)
	if err != nil {
		return failed(e, "payments", err)
	}
	pc := payments.Config{Rails: map[string]rail.Rail{}, Wallets: map[string][]string{}}
	for _, chain := range set.Chains() {
		pc.Rails[chain], _ = set.Rail(chain)
		pc.Wallets[chain] = set.Wallets(chain)
	}
	p, err := payments.New(st, pc).CheckNow(ctx, id)
	if err != nil {
		return fail(err)
	}
	if asJSON {
		return writeJSONLines(e, "payments", []store.Payment{*p})
	}
	line := fmt.Sprintf("payment %d: %s", id, p.State)
	if p.Reason != "" {
		line += ": " + termSafe(p.Reason)
	}
	fmt.Fprintln(e.stdout, line)
	return 0
}
