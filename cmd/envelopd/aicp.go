package main

var runAICP = notYet("aicp")
