package main

import "context"

func runCompare(ctx context.Context, e *env) int { return 2 }
