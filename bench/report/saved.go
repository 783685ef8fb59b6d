package main

import (
	"fmt"
	"os"
	"time"
)

// A run's saved output (bench/out/bench.txt) starts with header lines
// that say how the run was made, so that a report redrawn from it with
// -from gives the run's command, duration and date rather than its own.
// headerNote is not written by the report: it is for a person who
// splices rows measured again into a saved run, to say so in the tables
// redrawn from it.
const (
	headerCommand = "report-command"
	headerTook    = "report-took"
	headerDate    = "report-date"
	headerNote    = "report-note"
)

// savedHeader is the header of a run's saved output.
func savedHeader(command string, took time.Duration, ran time.Time) string {
	return fmt.Sprintf("%s: %s\n%s: %s\n%s: %s\n", headerCommand, command, headerTook, took,
		headerDate, ran.UTC().Format(time.RFC3339))
}

// savedRun is the command, duration and date of the run saved at path,
// from its header: for output saved without one, the command says it was
// redrawn from path, the duration is 0 and the date is the file's.
func savedRun(res *Results, path string) (command string, took time.Duration, ran time.Time) {
	command = "(saved) " + path
	if c := res.Header[headerCommand]; c != "" {
		command = c
	}
	took, _ = time.ParseDuration(res.Header[headerTook])
	ran, err := time.Parse(time.RFC3339, res.Header[headerDate])
	if err != nil {
		ran = time.Now()
		if fi, err := os.Stat(path); err == nil {
			ran = fi.ModTime()
		}
	}
	return command, took, ran
}
