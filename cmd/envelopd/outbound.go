package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/store"
)

// outboundFlags configure what serve and poll send: DKIM keys for courtesy
// OOPS mails, and the smarthost the outbound queue is delivered through.
type outboundFlags struct {
	smtpURL, passwordFile string
	oauth                 oauthFlags // --smtp-token-command, --smtp-oauth2-*
	dkimKeys, dkimSels    multiFlag
	dkimDomain            string
	dkimConfig            string
	submitTimeout         time.Duration
	// relay is set by serve in relay mode, whose own worker delivers the
	// queue (relayFlags.setup).
	relay bool
}

func (o *outboundFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.smtpURL, "smtp-url", "", "deliver the outbound queue through this smarthost (smtps://USER@HOST:465 or smtp://USER@HOST:587); empty keeps it pending")
	fs.StringVar(&o.passwordFile, "password-file", "", "smarthost AUTH password file (or $"+mailout.PasswordEnv+")")
	o.oauth.register(fs, "smtp-", "smarthost")
	fs.Var(&o.dkimKeys, "dkim-key", "DKIM private key PEM for outgoing mail (repeatable, paired with --dkim-selector)")
	fs.Var(&o.dkimSels, "dkim-selector", "DKIM selector for the --dkim-key at the same position")
	fs.StringVar(&o.dkimDomain, "dkim-domain", "", "DKIM signing domain (d=)")
	fs.StringVar(&o.dkimConfig, "dkim-config", "", dkimConfigUsage)
	fs.DurationVar(&o.submitTimeout, "submit-timeout", 0, "bound on one smarthost submission; an attempt cut off by a crash is retried after twice this (0: the submitter's own timeouts, retried after 15 min)")
}

const dkimConfigUsage = "DKIM signer config `FILE`: one signer a line, domain=D selector=S key=PATH (relative to FILE); the --dkim-key flags add to it"

// signers loads the configured DKIM keys: those of --dkim-config first,
// then one per --dkim-key.
func (o *outboundFlags) signers() ([]dkim.Signer, error) {
	if len(o.dkimKeys) != len(o.dkimSels) {
		return nil, fmt.Errorf("give one --dkim-selector per --dkim-key")
	}
	var out []dkim.Signer
	if o.dkimConfig != "" {
		ss, err := mailout.LoadDKIMConfig(o.dkimConfig)
		if err != nil {
			return nil, err
		}
		out = append(out, ss...)
	}
	for i := range o.dkimKeys {
		s, err := mailout.LoadSigner(o.dkimKeys[i], o.dkimSels[i], o.dkimDomain)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// setup wires the courtesy OOPS composer and the queue worker into rt.
func (o *outboundFlags) setup(ctx context.Context, rt *runtime, oops bool, reg prometheus.Registerer) error {
	signers, err := o.signers()
	if err != nil {
		return err
	}
	mailer := &mailout.Mailer{Signers: signers}
	if oops {
		rt.pipeline.OOPS = mailer.OOPS
		// An OOPS is sent only from a domain the operator signs for.
		for _, s := range signers {
			if d := strings.ToLower(s.Domain); !slices.Contains(rt.pipeline.OOPSDomains, d) {
				rt.pipeline.OOPSDomains = append(rt.pipeline.OOPSDomains, d)
			}
		}
	}
	st := rt.store
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "envelopd_queue_pending", Help: "Outbound queue entries with a pending recipient.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		q, err := st.Queue(ctx, store.QueuePending)
		if err != nil {
			return -1
		}
		return float64(len(q))
	}))
	w, err := o.worker(st, rt.log)
	if err != nil {
		return err
	}
	// Record how the queue is delivered, so that `envelopd queue` can
	// tell entries that wait for a smarthost nobody configured.
	mode := store.OutboundSmarthost
	switch {
	case o.relay:
		mode = store.OutboundRelay
	case w == nil:
		mode = store.OutboundNone
		// Without a signing domain no OOPS is queued at all (checkOOPS
		// says so): this warning would only repeat it.
		if oops && len(rt.pipeline.OOPSDomains) > 0 {
			rt.log.Warn("courtesy OOPS replies are enabled but there is no --smtp-url: they are queued and never sent " +
				"(envelopd queue shows them as no_smarthost); give --smtp-url, or --oops=false")
		}
	}
	if err := st.SetSetting(ctx, store.SettingOutbound, mode); err != nil {
		// A read-only database is a warning, not a stop (serve answers
		// 451 until it is writable; TestInteropReadOnlyDB): `queue` then
		// shows the mode last recorded.
		rt.log.Warn("could not record the outbound mode", "mode", mode, "err", err)
	}
	if w == nil {
		return nil
	}
	w.Metrics = rt.jobs
	if w.Wake == nil {
		wake := make(chan struct{}, 1)
		w.Wake = wake
		rt.workers = append(rt.workers, mailout.WakeOnQueue(st, wake))
	}
	rt.workers = append(rt.workers, w.Run)
	return nil
}

// worker is the outbound queue worker submitting to --smtp-url, or nil
// when no smarthost is set.
func (o *outboundFlags) worker(st store.OutboundQueue, log *slog.Logger) (*mailout.Worker, error) {
	if o.submitTimeout < 0 {
		return nil, fmt.Errorf("--submit-timeout must not be negative")
	}
	if o.smtpURL == "" {
		return nil, nil
	}
	sub, err := newSubmitter(o.smtpURL, o.passwordFile, &o.oauth)
	if err != nil {
		return nil, err
	}
	w := &mailout.Worker{Store: st, Sender: sub, Logger: log}
	if o.submitTimeout > 0 {
		w.SubmitTimeout, w.Lease = o.submitTimeout, 2*o.submitTimeout
	}
	return w, nil
}
