package main

var runParse = notYet("parse")
