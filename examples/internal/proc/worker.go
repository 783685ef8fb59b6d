package proc

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Worker is the program the examples' pods run by default: it runs until
// SIGTERM or SIGINT (exit status 0), or exits with --exit-code after
// --crash-after. It prints a line when it starts and when it stops, naming
// the pod it reads from the environment variable podEnv. It returns the
// exit status; 2 for bad arguments.
func Worker(args []string, podEnv string) int {
	fl := flag.NewFlagSet("worker", flag.ContinueOnError)
	crashAfter := fl.Duration("crash-after", 0, "exit after this long (0: run until stopped)")
	exitCode := fl.Int("exit-code", 1, "the exit status for --crash-after")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	pod := os.Getenv(podEnv)
	fmt.Printf("worker %d (pod %s): running\n", os.Getpid(), pod)
	var crash <-chan time.Time
	if *crashAfter > 0 {
		crash = time.After(*crashAfter)
	}
	// Where the parent-death signal does not exist, notice the parent's
	// death by being adopted.
	parent := os.Getppid()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			fmt.Printf("worker %d (pod %s): %v, stopping\n", os.Getpid(), pod, s)
			return 0
		case <-crash:
			fmt.Printf("worker %d (pod %s): crashing with exit status %d\n", os.Getpid(), pod, *exitCode)
			return *exitCode
		case <-tick.C:
			if os.Getppid() != parent {
				return 1
			}
		}
	}
}
