package shardchaos

// Entry is one record of the fenced log: a reconcile of Key by Replica,
// under Bucket's Epoch, from Start to End (CLOCK_MONOTONIC nanoseconds,
// the same in every process of the machine; see candidates.Mono). The
// replica writes it as JSON; the test reads it back.
type Entry struct {
	Key     string `json:"key"`
	Replica string `json:"replica"`
	Bucket  int    `json:"bucket"`
	Epoch   uint64 `json:"epoch"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
}
