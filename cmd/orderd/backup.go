package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"orderd/cluster"
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
				unlock, err := cfg.lockStore(lockBeside)
				if err != nil {
					return err
				}
				defer unlock()
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
	return restoreCommandWith(restoreHooks{})
}

// restoreHooks let tests act at the steps of a restore; the zero value is
// what orderd runs.
type restoreHooks struct {
	// checked runs once the backup has been checked, before anything is
	// put in place.
	checked func()
	// rename, when not nil, is used instead of os.Rename.
	rename func(oldpath, newpath string) error
	// syncDir, when not nil, is used instead of syncDir.
	syncDir func(dir string) error
}

func restoreCommandWith(hooks restoreHooks) command {
	return command{
		Name:    "restore",
		Summary: "replace the database with a backup (orderd must be stopped)",
		Help: "Copies the backup beside the database, checks the copy and renames it into place;\n" +
			"refuses while a daemon has the database open, and keeps the database it replaces, with\n" +
			"its -wal and -shm, as store.path + \".before-restore\" (refused while an earlier\n" +
			"restore's are there). FILE must be a regular file without a non-empty FILE-wal: restore\n" +
			"what orderd backup writes. In replicated mode, an instance restored from a backup\n" +
			"applies the log after the backup's sequence when it starts.",
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
				f, fi, err := openRegularFile(*in)
				if err != nil {
					return e.usagef("-i %s: %v", *in, err)
				}
				defer f.Close()
				// SQLite reads a database with its -wal, and the check would
				// see transactions that copying the file alone drops.
				if wal, err := os.Stat(*in + "-wal"); err == nil && wal.Size() > 0 {
					return e.usagef("-i %s: %s-wal holds committed transactions that are not in %s itself "+
						"(a database in use, or a plain copy of one); restore from what orderd backup writes", *in, *in, *in)
				}
				if live, err := os.Stat(cfg.Store.Path); err == nil && os.SameFile(fi, live) {
					return e.usagef("-i %s is the database at store.path itself; restore from what orderd backup writes", *in)
				}
				unlock, err := cfg.lockStore(lockAlone)
				if err != nil {
					return err
				}
				defer unlock()
				if _, err := cfg.removeTempFiles(); err != nil {
					fmt.Fprintf(e.Stderr, "orderd restore: removing temporary files left beside the database: %v\n", err)
				}
				// The files replaced are those of the database store.path
				// leads to: through a symbolic link, renaming the link would
				// leave the database and its -wal where they are.
				path, err := store.ResolvePath(cfg.Store.Path)
				if err != nil {
					return cfg.errorf("store.path", "%v", err)
				}
				// A rename would silently replace what an earlier restore
				// kept, and a -wal or -shm left of it would be paired with the
				// database kept now and corrupt it.
				for _, suffix := range dbSuffixes {
					if _, err := os.Lstat(path + ".before-restore" + suffix); err == nil {
						return e.usagef("%s exists, kept by an earlier restore; move %s.before-restore "+
							"and its -wal and -shm files away together first", path+".before-restore"+suffix, path)
					}
				}
				// What is checked is a copy beside store.path, read from the
				// file opened above, and that copy is what is put in place: a
				// file renamed onto -i meanwhile never reaches store.path.
				tmp, err := copyToTemp(f, filepath.Dir(path), "."+filepath.Base(path)+store.TempRestoringInfix+"*")
				if err != nil {
					return fmt.Errorf("copy %s: %w", *in, err)
				}
				defer removeDatabase(tmp)
				seq, err := store.CheckRestorable(ctx, tmp)
				if err != nil {
					// The check names the copy; the user knows the file as -i.
					return e.usagef("-i %s: %s", *in, strings.ReplaceAll(err.Error(), tmp, *in))
				}
				if cfg.Cluster.Enabled {
					if err := checkRestoreLog(ctx, e, cfg, tmp, *in); err != nil {
						return err
					}
				}
				if hooks.checked != nil {
					hooks.checked()
				}
				if err := takeOwnership(tmp, path); err != nil {
					return fmt.Errorf("restore %s: %w", path, err)
				}
				rename := os.Rename
				if hooks.rename != nil {
					rename = hooks.rename
				}
				if err := replaceDatabase(tmp, path, rename); err != nil {
					return fmt.Errorf("restore %s: %w", path, err)
				}
				// The renames are durable once the directory is synced;
				// until then a power cut could undo them.
				sync := syncDir
				if hooks.syncDir != nil {
					sync = hooks.syncDir
				}
				if err := sync(filepath.Dir(path)); err != nil {
					return fmt.Errorf("restore %s: the backup is in place, but syncing %s failed (%w): "+
						"a power cut now could undo the restore; run sync(1) before starting orderd",
						path, filepath.Dir(path), err)
				}
				fmt.Fprintf(e.Stdout, "restored %s from %s", cfg.Store.Path, *in)
				if path != cfg.Store.Path {
					fmt.Fprintf(e.Stdout, " (the database %s)", path)
				}
				if seq > 0 {
					fmt.Fprintf(e.Stdout, " (log sequence %d)", seq)
				}
				fmt.Fprintln(e.Stdout)
				return nil
			}
		},
	}
}

// takeOwnership gives the copy at tmp the mode and owner of the database
// at path it is to replace (of the store's directory when there is none),
// so that the service, which runs as its own user, can open what root
// restored. Changing the owner needs root; without it the owner is the
// caller's, as before.
func takeOwnership(tmp, path string) error {
	mode := os.FileMode(0o600)
	ref, err := os.Stat(path)
	if err == nil {
		mode = ref.Mode().Perm()
	} else if errors.Is(err, os.ErrNotExist) {
		ref, err = os.Stat(filepath.Dir(path))
	}
	if err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	st, ok := ref.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	return os.Chown(tmp, int(st.Uid), int(st.Gid))
}

// copyToTemp copies r to a new private (0600) file in dir, named after
// pattern as os.CreateTemp does, synced, and returns its path.
func copyToTemp(r io.Reader, dir, pattern string) (string, error) {
	out, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(out, r)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", err
	}
	return out.Name(), nil
}

// replaceDatabase moves the database at path, with its -wal and -shm, to
// path + ".before-restore" (the WAL belongs to its database and goes with
// it) and renames tmp to path. When a rename fails it undoes the ones done
// so far, so that path holds what it held before rather than nothing (on
// which the next start would create an empty database), and its error
// says whether that worked.
func replaceDatabase(tmp, path string, rename func(oldpath, newpath string) error) error {
	var moved []string
	undo := func(err error) error {
		var failed []string
		for _, suffix := range slices.Backward(moved) {
			if uerr := rename(path+".before-restore"+suffix, path+suffix); uerr != nil {
				failed = append(failed, uerr.Error())
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("%w; putting the database back failed too (%s): move %s.before-restore and its "+
				"-wal and -shm files back to %s by hand before starting orderd", err, strings.Join(failed, "; "), path, path)
		}
		return fmt.Errorf("%w; nothing was replaced, %s is as it was", err, path)
	}
	for _, suffix := range dbSuffixes {
		if _, err := os.Lstat(path + suffix); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := rename(path+suffix, path+".before-restore"+suffix); err != nil {
			return undo(err)
		}
		moved = append(moved, suffix)
	}
	if err := rename(tmp, path); err != nil {
		return undo(err)
	}
	return nil
}

// syncDir flushes dir's entries (renames, new files) to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// dbSuffixes name a SQLite database's files: the database, its WAL and
// the WAL's index, appended to its path.
var dbSuffixes = []string{"", "-wal", "-shm"}

// removeDatabase removes the database file at path with the -wal and -shm
// files SQLite may have left beside it; a path already gone is no error.
func removeDatabase(path string) {
	for _, suffix := range dbSuffixes {
		os.Remove(path + suffix)
	}
}

// checkRestoreLog refuses, in replicated mode, a backup that follows
// another log than the one this instance follows: the log's id as its
// stream records it, and the id the database being replaced records. The
// instance would refuse to start on it, and a restore must not throw
// away a good database for a file that cannot be used. A backup that
// records no log (written before logs had ids) is left to the start's
// checks.
func checkRestoreLog(ctx context.Context, e *env, cfg *Config, tmp, in string) error {
	have, err := store.ReadLogID(ctx, tmp)
	if err != nil {
		return e.usagef("-i %s: %s", in, strings.ReplaceAll(err.Error(), tmp, in))
	}
	if have == "" {
		return nil
	}
	if cur, err := store.ReadLogID(ctx, cfg.Store.Path); err == nil && cur != "" && cur != have {
		return e.usagef("-i %s follows log %s, but the database at store.path follows log %s: it is a backup of another deployment "+
			"or of a log since seeded anew, and this instance would refuse to start on it", in, have, cur)
	}
	// The log itself has the last word; when NATS cannot be asked, the
	// instance's start compares again.
	ncfg, err := e.LoadConfigFor(configUse{NATS: true})
	if err != nil {
		return err
	}
	lg := slog.New(slog.DiscardHandler)
	d := &daemon{cfg: ncfg, log: lg, now: time.Now, registry: prometheus.NewRegistry()}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.connectNATS(cctx); err != nil {
		fmt.Fprintf(e.Stderr, "orderd restore: could not compare the backup's log with the cluster's (%v); orderd run compares them at start\n", err)
		return nil
	}
	defer d.nc.Close()
	logID, err := cluster.LogID(cctx, d.nc, d.clusterConfig())
	if err != nil {
		fmt.Fprintf(e.Stderr, "orderd restore: could not compare the backup's log with the cluster's (%v); orderd run compares them at start\n", err)
		return nil
	}
	if logID != "" && logID != have {
		return e.usagef("-i %s follows log %s, but the log %s is log %s: it is a backup of another deployment "+
			"or of a log since seeded anew, and this instance would refuse to start on it", in, have, cfg.Cluster.LogStream, logID)
	}
	return nil
}
