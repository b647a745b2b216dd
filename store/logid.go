package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// LogID returns the id of the replicated log this database follows, or ""
// when it records none (a single-node database, or one written before
// logs had ids).
func (s *Store) LogID(ctx context.Context) (string, error) {
	return logID(ctx, s.rdb)
}

func logID(ctx context.Context, db *sql.DB) (string, error) {
	var id string
	err := db.QueryRowContext(ctx, `SELECT log_id FROM log_identity WHERE id = 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("log id: %w", err)
	}
	return id, nil
}

// FollowLog records that this database follows the log with id id, when
// it records none yet (an empty database on a first start, or one written
// before logs had ids). It is a local write, never a log entry: only the
// instance's own database learns which log it follows. It refuses to
// replace another id (ErrOtherLog).
func (s *Store) FollowLog(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("store: follow log: empty id")
	}
	return s.write(ctx, func(tx *Tx) error {
		var have string
		err := tx.QueryRow(`SELECT log_id FROM log_identity WHERE id = 1`).Scan(&have)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.Exec(`INSERT INTO log_identity (id, log_id) VALUES (1, ?)`, id)
			return err
		case err != nil:
			return err
		case have != id:
			return fmt.Errorf("%w: the database follows log %s, not %s", ErrOtherLog, have, id)
		}
		return nil
	}, false)
}

// ErrOtherLog: the database follows another replicated log.
var ErrOtherLog = errors.New("store: the database follows another log")

// StartLog makes this database the start of the new log id: it records
// id as the log it follows and sets its applied log sequence to 0, in one
// transaction, so that the database (and a snapshot of it) is the state
// before the new log's first entry. orderd cluster seed runs it on a
// database no daemon has open. It returns the number of orders.
func (s *Store) StartLog(ctx context.Context, id string) (orders int64, err error) {
	if id == "" {
		return 0, errors.New("store: start log: empty id")
	}
	err = s.write(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(`INSERT INTO log_identity (id, log_id) VALUES (1, ?)
			ON CONFLICT (id) DO UPDATE SET log_id = excluded.log_id`, id); err != nil {
			return err
		}
		// The old log's sequences mean nothing in the new one.
		if _, err := tx.Exec(`DELETE FROM store_meta WHERE key = ?`, appliedSeqKey); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM log_entries`); err != nil {
			return err
		}
		return tx.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders)
	}, false)
	if err != nil {
		return 0, fmt.Errorf("start log %s: %w", id, err)
	}
	return orders, nil
}

// ReadLogID returns the log id recorded in the database file at path
// (a backup, say), read-only; "" when it records none.
func ReadLogID(ctx context.Context, path string) (string, error) {
	db, closeFile, err := openFile(path)
	if err != nil {
		return "", err
	}
	defer closeFile()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'log_identity'`).Scan(&n); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if n == 0 {
		// Written before logs had ids.
		return "", nil
	}
	return logID(ctx, db)
}
