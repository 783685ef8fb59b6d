package reconcile

import (
	"fmt"
	"slices"
)

// The debug pages' JSON names enums, as their HTML does: a reader need not
// know the numbering, and a new kind cannot shift the meaning of old dumps.

// MarshalText returns the kind's name (see String).
func (k TriggerKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a name MarshalText wrote.
func (k *TriggerKind) UnmarshalText(b []byte) error {
	i := slices.Index(triggerKindNames[1:], string(b))
	if i < 0 {
		return fmt.Errorf("reconcile: unknown trigger kind %q", b)
	}
	*k = TriggerKind(i + 1)
	return nil
}

// MarshalText returns the kind's name (see String).
func (k ChangeKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a name MarshalText wrote.
func (k *ChangeKind) UnmarshalText(b []byte) error {
	for _, c := range []ChangeKind{Added, Updated, Deleted} {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("reconcile: unknown change kind %q", b)
}
