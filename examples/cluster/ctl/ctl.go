package ctl

import "io"

func Main(args []string, stdout, stderr io.Writer) int { return 2 }
