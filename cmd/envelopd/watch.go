package main

var runWatch = notYet("watch")
