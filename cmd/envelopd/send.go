package main

var runSend = notYet("send")
