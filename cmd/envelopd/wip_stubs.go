//go:build !envelopd_wip

package main

// Until the store and mailin land, these commands answer "not yet".
var (
	runServe  = notYet("serve")
	runInbox  = notYet("inbox")
	runThread = notYet("thread")
	runWatch  = notYet("watch")
	runKeys   = notYet("keys")
)
