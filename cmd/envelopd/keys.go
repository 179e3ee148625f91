package main

var runKeys = notYet("keys")
