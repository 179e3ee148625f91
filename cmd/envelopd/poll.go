package main

var runPoll = notYet("poll")
