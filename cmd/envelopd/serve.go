package main

var runServe = notYet("serve")
