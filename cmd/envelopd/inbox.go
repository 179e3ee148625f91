package main

var runInbox = notYet("inbox")
