package main

var runThread = notYet("thread")
