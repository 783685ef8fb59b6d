package sqlitestore

import "context"

// CompactOld runs one background compaction now.
func (db *DB) CompactOld(ctx context.Context) error { return db.compactOld(ctx) }
