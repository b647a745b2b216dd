package reconcile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"orderd/internal/filekind"
)

// WriteFileAtomic writes path through write so that path only ever holds
// a finished file: the bytes go to a temporary file in the same directory,
// which is flushed, fsynced and renamed over path, and the directory is
// fsynced so the rename survives a crash. When write (or any step) fails,
// the temporary file is removed and path is left as it was — a finished
// report is never replaced by a partial one.
func WriteFileAtomic(path string, write func(w io.Writer) error) error {
	af, err := createAtomic(path)
	if err != nil {
		return err
	}
	if err := write(af.w); err != nil {
		af.abort()
		return err
	}
	return af.commit()
}

// atomicFile is a file being written under a temporary name.
type atomicFile struct {
	path string
	f    *os.File
	w    *bufio.Writer
}

// reportFileMode is the mode of every report file: its owner and its
// group read it, whatever the process's umask (systemd's UMask=0077
// would leave 0600). The group is the directory's when the directory is
// setgid, which is how readers are given access (see docs/finance.md,
// "Getting the scheduled reports to finance").
const reportFileMode = 0o640

// reportDirMode is the mode of a reports directory orderd creates, for
// the same readers, set explicitly for the same reason.
const reportDirMode = 0o750

// ErrNotRegularFile is a report path that names something other than a
// regular file: a device, a FIFO, a directory, a socket. Writing a report
// renames a new file over its path, which would replace such a node (as
// root, /dev/null itself) rather than write to it.
var ErrNotRegularFile = errors.New("not a regular file")

// reportPath is where a report for path is written: path itself, or the
// file a symbolic link at path points to, so that the link stays a link.
// Anything there other than a regular file is ErrNotRegularFile.
func reportPath(path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return path, nil
	}
	if err != nil {
		return "", err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s is a symbolic link to a missing file", path)
		}
		if err != nil {
			return "", err
		}
		if fi, err = os.Stat(target); err != nil {
			return "", err
		}
		path = target
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is %w (%s)", path, ErrNotRegularFile, filekind.Of(fi.Mode()))
	}
	return path, nil
}

func createAtomic(path string) (*atomicFile, error) {
	path, err := reportPath(path)
	if err != nil {
		return nil, fmt.Errorf("report file: %w", err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &atomicFile{path: path, f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

func (a *atomicFile) abort() {
	a.f.Close()
	os.Remove(a.f.Name())
}

func (a *atomicFile) commit() error {
	err := a.w.Flush()
	if err == nil {
		err = a.f.Chmod(reportFileMode)
	}
	if err == nil {
		err = a.f.Sync()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(a.f.Name(), a.path)
	}
	if err != nil {
		os.Remove(a.f.Name())
		return fmt.Errorf("write %s: %w", a.path, err)
	}
	if err := syncDir(filepath.Dir(a.path)); err != nil {
		return fmt.Errorf("write %s: %w", a.path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// SummaryPath is where a CSV report written to path puts its
// per-currency summary: "report.csv" → "report-summary.csv" (any other
// name gets "-summary.csv" appended).
func SummaryPath(path string) string {
	return strings.TrimSuffix(path, ".csv") + "-summary.csv"
}

// FindingsPath is where a CSV report written to path puts its findings
// with their trails: "report.csv" → "report-findings.csv".
func FindingsPath(path string) string {
	return strings.TrimSuffix(path, ".csv") + "-findings.csv"
}

// WriteCSVFiles writes the CSV report of p to path (order lines),
// SummaryPath(path) (per-currency totals) and FindingsPath(path) (the
// findings and their trails), each atomically.
func (r *Reporter) WriteCSVFiles(ctx context.Context, path string, p Period) error {
	var files []*atomicFile
	abort := func() {
		for _, f := range files {
			f.abort()
		}
	}
	for _, name := range []string{path, SummaryPath(path), FindingsPath(path)} {
		f, err := createAtomic(name)
		if err != nil {
			abort()
			return err
		}
		files = append(files, f)
	}
	if err := r.WriteCSVParts(ctx, files[0].w, files[1].w, files[2].w, p); err != nil {
		abort()
		return err
	}
	for i, f := range files {
		if err := f.commit(); err != nil {
			for _, g := range files[i+1:] {
				g.abort()
			}
			return err
		}
	}
	return nil
}

// WriteFile writes the report of p in format to path atomically; a CSV
// report also writes its summary file (see WriteCSVFiles).
func (r *Reporter) WriteFile(ctx context.Context, path string, p Period, format string) error {
	switch format {
	case FormatCSV:
		return r.WriteCSVFiles(ctx, path, p)
	case FormatJSON, FormatHTML:
		base := strings.TrimSuffix(filepath.Base(path), "."+format)
		opts := WriteOptions{CSVHref: base + "." + FormatCSV}
		return WriteFileAtomic(path, func(w io.Writer) error { return r.Write(ctx, w, p, format, opts) })
	default:
		return fmt.Errorf("report format %q is not one of %s", format, strings.Join(Formats, ", "))
	}
}

// WriteAll writes the report of p in every format into dir, under
// p.FileName, creating dir if needed. It returns the paths written (the
// CSV summary included), and carries on past a failed format, returning
// the errors joined. The files are mode 0640; a directory it creates is
// mode 0750 (an existing one is left as it is).
func (r *Reporter) WriteAll(ctx context.Context, dir string, p Period) ([]string, error) {
	if err := makeReportsDir(dir); err != nil {
		return nil, fmt.Errorf("reports dir: %w", err)
	}
	var (
		paths []string
		errs  []error
	)
	for _, f := range Formats {
		path := filepath.Join(dir, p.FileName(f))
		if err := r.WriteFile(ctx, path, p, f); err != nil {
			errs = append(errs, err)
			continue
		}
		paths = append(paths, path)
		if f == FormatCSV {
			paths = append(paths, SummaryPath(path), FindingsPath(path))
		}
	}
	return paths, errors.Join(errs...)
}

// makeReportsDir creates dir (and its parents) when it does not exist,
// and gives dir itself reportDirMode, which the process's umask would
// narrow. The setgid bit a directory inherits from a setgid parent is
// kept: it is what gives the files the readers' group.
func makeReportsDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, reportDirMode); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	return os.Chmod(dir, reportDirMode|fi.Mode()&os.ModeSetgid)
}

// DailyJob returns the scheduled report job: each run writes the previous
// UTC day's report (by the reporter's clock) in every format into dir.
// Register it with Reconciler.AddJob under JobReport with
// Schedules.Report, so each run is recorded like the reconcile jobs.
func (r *Reporter) DailyJob(dir string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		p := Day(r.now().UTC().Add(-24 * time.Hour))
		start := time.Now()
		paths, err := r.WriteAll(ctx, dir, p)
		if err != nil {
			return fmt.Errorf("report %s: %w", p, err)
		}
		r.log.Info("report written", "period", p.String(), "files", paths, "elapsed", time.Since(start))
		return nil
	}
}
