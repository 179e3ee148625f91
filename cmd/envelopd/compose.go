package main

var runCompose = notYet("compose")
