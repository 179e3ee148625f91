package main

var runReply = notYet("reply")
