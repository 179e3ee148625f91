package main

var runQueue = notYet("queue")
