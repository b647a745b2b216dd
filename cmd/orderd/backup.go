package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"orderd/store"
)

func backupCommand() command {
	return command{
		Name:    "backup",
		Summary: "write a consistent copy of the database to a file (safe while orderd runs)",
		Help: "The copy is a SQLite database (VACUUM INTO) read from one snapshot, so writes go on\n" +
			"meanwhile. In replicated mode it also holds the log sequence it has applied.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			out := fs.String("o", "", "file to write; must not exist (required)")
			return func(ctx context.Context, e *env) error {
				if err := noArgs(e); err != nil {
					return err
				}
				if *out == "" {
					return e.usagef("-o FILE is required")
				}
				if _, err := os.Stat(*out); err == nil {
					return e.usagef("-o %s exists; orderd backup never overwrites", *out)
				}
				cfg, err := e.LoadConfigFor(configUse{})
				if err != nil {
					return err
				}
				if err := cfg.checkStorePath(true); err != nil {
					return err
				}
				st, err := store.Open(ctx, cfg.Store.Path, store.Options{ReadOnly: true})
				if err != nil {
					return fmt.Errorf("open %s: %w", cfg.Store.Path, err)
				}
				defer st.Close(context.WithoutCancel(ctx))
				if err := st.Backup(ctx, *out); err != nil {
					return err
				}
				seq, err := store.CheckBackup(ctx, *out)
				if err != nil {
					os.Remove(*out)
					return fmt.Errorf("the copy does not check out: %w", err)
				}
				fi, _ := os.Stat(*out)
				fmt.Fprintf(e.Stdout, "wrote %s (%d bytes", *out, fi.Size())
				if seq > 0 {
					fmt.Fprintf(e.Stdout, ", log sequence %d", seq)
				}
				fmt.Fprintln(e.Stdout, ")")
				return nil
			}
		},
	}
}

func restoreCommand() command {
	return command{
		Name:    "restore",
		Summary: "replace the database with a backup (orderd must be stopped)",
		Help: "Checks the backup, refuses while a daemon has the database open, keeps the database it\n" +
			"replaces as store.path + \".before-restore\". In replicated mode, an instance restored\n" +
			"from a backup applies the log after the backup's sequence when it starts.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			in := fs.String("i", "", "backup file to restore (required)")
			return func(ctx context.Context, e *env) error {
				if err := noArgs(e); err != nil {
					return err
				}
				if *in == "" {
					return e.usagef("-i FILE is required")
				}
				cfg, err := e.LoadConfigFor(configUse{})
				if err != nil {
					return err
				}
				if err := cfg.checkStorePath(false); err != nil {
					return err
				}
				// SQLite would block opening a FIFO until someone writes to
				// it, and read a device or fail on a directory obscurely.
				f, _, err := openRegularFile(*in)
				if err != nil {
					return e.usagef("-i %s: %v", *in, err)
				}
				f.Close()
				seq, err := store.CheckBackup(ctx, *in)
				if err != nil {
					return e.usagef("-i %s: %v", *in, err)
				}
				unlock, err := store.Lock(cfg.Store.Path)
				if errors.Is(err, store.ErrLocked) {
					return cfg.errorf("store.path", "%s is open in a running orderd; stop it first", cfg.Store.Path)
				}
				if err != nil {
					return err
				}
				defer unlock()
				path := cfg.Store.Path
				tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".restoring")
				if err := copyFile(*in, tmp); err != nil {
					return err
				}
				// The database it replaces is kept, with its WAL.
				for _, suffix := range []string{"", "-wal", "-shm"} {
					if _, err := os.Stat(path + suffix); err == nil {
						if err := os.Rename(path+suffix, path+".before-restore"+suffix); err != nil {
							os.Remove(tmp)
							return err
						}
					}
				}
				if err := os.Rename(tmp, path); err != nil {
					return err
				}
				fmt.Fprintf(e.Stdout, "restored %s from %s", path, *in)
				if seq > 0 {
					fmt.Fprintf(e.Stdout, " (log sequence %d)", seq)
				}
				fmt.Fprintln(e.Stdout)
				return nil
			}
		},
	}
}

// copyFile copies src to dst (0600), synced.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
