package main

var runVacant = notYet("vacant")
