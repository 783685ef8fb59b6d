package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/converge-go/converge/backoff"
)

func ExampleExponential_Delay() {
	e := backoff.Exponential{Base: 100 * time.Millisecond, Cap: 5 * time.Second}
	for attempt := range 8 {
		fmt.Println(attempt, e.Delay(attempt))
	}
	// Overflow saturates at the cap.
	fmt.Println(1<<40, e.Delay(1<<40))

	// With jitter, a seeded source makes the sequence reproducible.
	seeded := func() backoff.Exponential {
		return backoff.Exponential{Base: time.Second, Cap: time.Second, Jitter: backoff.EqualJitter, Rand: rand.New(rand.NewPCG(1, 2))}
	}
	a, b := seeded(), seeded()
	d := a.Delay(0)
	fmt.Println(d == b.Delay(0), d >= 500*time.Millisecond && d <= time.Second)
	// Output:
	// 0 100ms
	// 1 200ms
	// 2 400ms
	// 3 800ms
	// 4 1.6s
	// 5 3.2s
	// 6 5s
	// 7 5s
	// 1099511627776 5s
	// true true
}

func ExampleExponential_Validate() {
	e := backoff.Exponential{Base: time.Minute, Cap: time.Second, Factor: 0.5}
	fmt.Println(e.Validate())
	// Delay still works, repairing the settings.
	fmt.Println(e.Delay(0), e.Delay(3))
	// Output:
	// backoff: Factor 0.5 is below 1, so delays would shrink
	// backoff: Base 1m0s is above the cap 1s, so every delay would be the cap
	// 1s 1s
}

func ExamplePerKey() {
	l := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Minute})

	// "a" fails three times, "b" once: each key backs off on its own.
	fmt.Println(l.When("a"), l.When("a"), l.When("b"), l.When("a"))
	fmt.Println(l.NumRequeues("a"), l.NumRequeues("b"))

	// "a" succeeds: the next failure starts from Base again.
	l.Forget("a")
	fmt.Println(l.NumRequeues("a"), l.When("a"))
	// Output:
	// 1s 2s 1s 4s
	// 3 1
	// 0 1s
}

func ExampleMax() {
	// A slow start that grows gently, and a fast start that grows steeply:
	// Max follows whichever is longer at each failure.
	gentle := backoff.NewPerKey[string](backoff.Exponential{Base: time.Second, Cap: time.Minute})
	steep := backoff.NewPerKey[string](backoff.Exponential{Base: 100 * time.Millisecond, Factor: 10, Cap: time.Minute})
	l := backoff.Max[string](gentle, steep)

	for range 4 {
		fmt.Println(l.When("k"))
	}
	l.Forget("k")
	fmt.Println(gentle.NumRequeues("k"), steep.NumRequeues("k"))
	// Output:
	// 1s
	// 2s
	// 10s
	// 1m0s
	// 0 0
}

func ExampleBucket() {
	// 2 retries per second, bursts of 2, on a clock that stands still.
	clk := clocktesting.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	b := backoff.NewBucket[string](2, 2, clk)

	for range 4 {
		fmt.Println(b.When("any key"))
	}
	// Output:
	// 0s
	// 0s
	// 500ms
	// 1s
}
