package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
)

// logging is the process's one zap core, which the rest of orderd sees only
// as a *slog.Logger. It is built once, here; no other package imports zap.
// Components tag their lines with Logger.With("component", name).
type logging struct {
	// Logger is the root logger; give each component
	// Logger.With("component", "receiver") and so on.
	Logger *slog.Logger
	level  zap.AtomicLevel
	core   zapcore.Core
}

// newLogging builds the logger. It writes JSON lines (what journald and log
// shippers want) unless cfg.Format is "console", or "auto" and w is a
// terminal. Under systemd's journal (JOURNAL_STREAM set and w not a
// terminal) every line starts with a syslog priority such as "<4>", which
// journald strips and records, so "journalctl -p warning" works.
func newLogging(cfg LogConfig, w io.Writer, getenv func(string) string) (*logging, error) {
	level, err := parseLevel(cfg.Level)
	if err != nil {
		return nil, &configError{Key: "log.level", Problem: err.Error()}
	}
	atom := zap.NewAtomicLevelAt(level)
	terminal := isTerminal(w)

	var enc zapcore.Encoder
	switch cfg.Format {
	case "console":
		enc = consoleEncoder(terminal)
	case "json":
		enc = jsonEncoder()
	case "auto", "":
		if terminal {
			enc = consoleEncoder(true)
		} else {
			enc = jsonEncoder()
		}
	default:
		return nil, &configError{Key: "log.format", Problem: fmt.Sprintf("%q is not one of auto, json, console", cfg.Format)}
	}

	ws := zapcore.Lock(zapcore.AddSync(w))
	var core zapcore.Core
	if getenv("JOURNAL_STREAM") != "" && !terminal {
		core = journalCore(enc, ws, atom)
	} else {
		core = zapcore.NewCore(enc, ws, atom)
	}
	return &logging{
		// No stack traces: an error line here is a condition to act on
		// (a store that cannot commit, a quarantined body), logged from
		// one known place, and journald would show the trace as many
		// lines. Panics still print theirs.
		Logger: slog.New(zapslog.NewHandler(core, zapslog.AddStacktraceAt(slog.LevelError+100))),
		level:  atom,
		core:   core,
	}, nil
}

// SetLevel changes the level of every logger derived from l, for a reload
// on SIGHUP.
func (l *logging) SetLevel(level string) error {
	lvl, err := parseLevel(level)
	if err != nil {
		return &configError{Key: "log.level", Problem: err.Error()}
	}
	l.level.SetLevel(lvl)
	return nil
}

// Sync flushes buffered log lines; call it last, before the process exits.
func (l *logging) Sync() error {
	return l.core.Sync()
}

func parseLevel(s string) (zapcore.Level, error) {
	switch s {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info", "":
		return zapcore.InfoLevel, nil
	case "warn":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("%q is not one of debug, info, warn, error", s)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// utcTime writes timestamps in UTC with milliseconds, the same on every host.
func utcTime(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
	enc.AppendString(t.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

func jsonEncoder() zapcore.Encoder {
	c := zap.NewProductionEncoderConfig()
	c.TimeKey = "time"
	c.EncodeTime = utcTime
	c.EncodeDuration = zapcore.StringDurationEncoder
	return zapcore.NewJSONEncoder(c)
}

func consoleEncoder(color bool) zapcore.Encoder {
	c := zap.NewDevelopmentEncoderConfig()
	c.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	c.EncodeDuration = zapcore.StringDurationEncoder
	if color {
		c.EncodeLevel = zapcore.CapitalColorLevelEncoder
	}
	return zapcore.NewConsoleEncoder(c)
}

// journalCore is one core per level, each prefixing its lines with the
// level's syslog priority.
func journalCore(enc zapcore.Encoder, ws zapcore.WriteSyncer, atom zap.AtomicLevel) zapcore.Core {
	priorities := []struct {
		level  zapcore.Level
		prefix string
	}{
		{zapcore.DebugLevel, "<7>"},
		{zapcore.InfoLevel, "<6>"},
		{zapcore.WarnLevel, "<4>"},
		{zapcore.ErrorLevel, "<3>"},
		{zapcore.DPanicLevel, "<2>"},
		{zapcore.PanicLevel, "<2>"},
		{zapcore.FatalLevel, "<2>"},
	}
	cores := make([]zapcore.Core, 0, len(priorities))
	for _, p := range priorities {
		enabled := zap.LevelEnablerFunc(func(l zapcore.Level) bool {
			return l == p.level && atom.Enabled(l)
		})
		cores = append(cores, zapcore.NewCore(enc.Clone(), prefixWriter{prefix: []byte(p.prefix), ws: ws}, enabled))
	}
	return zapcore.NewTee(cores...)
}

// prefixWriter writes prefix and line in one Write, so lines from
// concurrent loggers never interleave.
type prefixWriter struct {
	prefix []byte
	ws     zapcore.WriteSyncer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	line := make([]byte, 0, len(p.prefix)+len(b))
	line = append(append(line, p.prefix...), b...)
	if _, err := p.ws.Write(line); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (p prefixWriter) Sync() error { return p.ws.Sync() }
