package main

var runDKIM = notYet("dkim")
