package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Resource names the scheduler counts.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
	ResourcePods   = "pods"
)

// ResourceList maps a resource name to an amount, written as Kubernetes
// writes quantities: "500m" or "2" CPUs, "256Mi" or "1G" bytes.
type ResourceList map[string]Quantity

// Quantity is an amount as written by a user. It is kept as written, so a
// stored object reads back as it was applied; Milli parses it.
type Quantity string

var quantitySuffixes = []struct {
	suffix string
	mult   float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
	{"m", 1e-3},
}

// Milli returns the quantity in thousandths: "500m" is 500, "2" is 2000,
// "1Ki" is 1,024,000. It fails on anything else, and on a negative or
// too large amount.
func (q Quantity) Milli() (int64, error) {
	s := strings.TrimSpace(string(q))
	mult := 1.0
	for _, sf := range quantitySuffixes {
		if rest, ok := strings.CutSuffix(s, sf.suffix); ok {
			s, mult = rest, sf.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("quantity %q: want a number with an optional suffix (m, k, M, G, Ki, Mi, Gi)", string(q))
	}
	v := math.Ceil(f * mult * 1000)
	if v < 0 || v > math.MaxInt64/2 {
		return 0, fmt.Errorf("quantity %q: out of range", string(q))
	}
	return int64(v), nil
}
