// Package leader elects one leader among replicas. An Elector campaigns for
// a Lock (a single record with compare-and-swap), leads while it renews the
// lease, and steps down when it cannot; the leader's work runs in
// Config.OnStartedLeading with a context that is cancelled when leadership
// ends and that carries the term's fencing token (TermFromContext). Locks
// for each backend live in sub-packages: leader/memlock for tests and single
// processes; leader/etcdlock and leader/pglock implement the same small
// Lock interface, as any store with compare-and-swap can. The package
// depends on no other package of the module.
//
// # Terms and fencing
//
// Each acquisition writes a Term one greater than the record's previous
// Term; renewals keep it. A Term is therefore never handed out twice, and
// later terms are larger. Leadership by lease can only promise that a
// deposed leader is told to stop, not that it has stopped: a write already
// in flight when its context is cancelled may still land. So may one begun
// after a pause of the whole process (SIGSTOP, a frozen VM) longer than
// LeaseDuration−RenewDeadline: when it resumes, its work may run before
// the watchdog cancels its context. Elector.IsLeader reads the clock, so it
// is false once another candidate may have taken over: checking it right
// before a write narrows the window to the write itself. A reconciler that
// must never be overwritten by an old leader stores the Term with each
// write and makes the write conditional on it (an etcd transaction
// comparing a fence key, "UPDATE … WHERE fence <= $term" in SQL). That
// check does not depend on clocks at all.
//
// # Safety argument
//
// A term's lease, as its holder reckons it, lasts from the start of the
// acquisition until the holder's watchdog fires, the holder sees another
// holder in the record, or the term is over (its work has returned and
// Run's context is done). The leader's context is live only within the
// lease: it is cancelled when the lease ends, and also as soon as Run's
// context is done.
//
// Claim: given clocks whose rates differ from real time by at most a
// fraction ρ, with RenewDeadline×(1+ρ) + ε < LeaseDuration×(1−ρ), where ε is
// the time the leader's work needs to notice its cancelled context, no
// candidate acquires the lock while a holder's lease lasts, so none while a
// leader's context is still live.
//
//  1. The leader's lease is counted from the local time at which it started
//     its last successful acquisition or renewal, t_s. The write landed at
//     some real time t_w ≥ t_s, because the request was sent after t_s.
//  2. A watchdog ends the lease, and so cancels the leader's context, at
//     t_s + RenewDeadline on the leader's clock, independently of any call
//     to the Lock that may be blocked: at most RenewDeadline×(1+ρ) of real
//     time after t_s. Check reports the case where the leader's work keeps
//     running beyond it.
//  3. A candidate judges expiry only by its own clock: it remembers the
//     local time t_o at which it first saw the record's current Version and
//     takes over no earlier than LeaseDuration after t_o by its clock, that
//     is at least LeaseDuration×(1−ρ) of real time after t_o. It decides
//     right after reading the record, and takes over by a compare-and-swap
//     on the Version it read, so the version it timed is the leader's latest
//     write, and it saw it after it was written: t_o ≥ t_w ≥ t_s. A record that was
//     released (empty holder) is taken at once: its holder released it only
//     after its work returned.
//  4. Any later write by the leader has a later t_s' and a new Version, so it
//     only pushes both bounds later; a renewal the leader thought failed but
//     that landed only makes candidates wait longer.
//  5. Hence the lease ends at most t_s + RenewDeadline×(1+ρ) and a candidate
//     acquires at least t_s + LeaseDuration×(1−ρ), and the inequality in the
//     claim orders them with ε to spare. With the defaults (15s, 10s) the
//     margin is 5s, which tolerates drift ρ up to 20% with ε = 0; real
//     clocks drift by far less than 0.1%.
//
// Stopping is where this matters most. When Run's context is done, the
// leader's work is told to stop at once, but it may take a while: a
// reconcile in progress may be given a grace to finish (reconcile.Manager
// gives controllers one, 30s by default, longer than the default lease).
// Run therefore keeps renewing until the work has returned, and only then
// releases the lock (ReleaseOnCancel) or stops renewing. Had it stopped
// renewing at once, a successor would start LeaseDuration later while the
// old work still ran. If renewals fail while the work finishes, the lease
// ends by step 2's bound as in any term, the work, already told to stop,
// gets no further signal from the elector, and Check reports it once it
// outlives the bound; a caller that must stop at that moment watches the
// lease itself, as reconcile.Manager does by running the elector on a
// context it cancels only after its work has returned.
//
// Only elapsed time on each machine's own clock is used, so the argument
// needs bounded clock rates, not synchronised clocks. The record's
// AcquireTime and RenewTime are the holder's wall clock: comparing them with
// a candidate's wall clock would make safety depend on the offset between
// two machines' clocks, which NTP steps, VM pauses and misconfiguration can
// make arbitrarily large. They are kept for people reading the record, never
// used in a decision. This is also why a candidate that starts after the
// leader crashed waits a full LeaseDuration: it cannot know how long ago the
// record was written.
//
// The argument also assumes the Lock's compare and swap is linearisable
// (etcd's transactions and a PostgreSQL row update are) and durable (a write
// the Lock acknowledged is never lost, or a Term and a Version could be
// handed out twice), and that Identity is unique per process: an elector
// that sees its own identity in the record while not leading takes it at
// once, as a restarted process would.
//
// # Timings
//
// LeaseDuration > RenewDeadline > JitterFactor×RetryPeriod > 0, checked by
// New. The leader renews every RetryPeriod; candidates retry every
// RetryPeriod to JitterFactor×RetryPeriod. The defaults are client-go's
// numbers, 15s, 10s, 2s and 1.2, but the jitter does not mean the same:
// client-go waits RetryPeriod×(1+u×1.2) for u in [0, 1), so 2s to 4.4s, where
// converge waits 2s to 2.4s. A candidate here notices a free lock sooner;
// raise JitterFactor to spread many candidates wider.
package leader
