package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is one subcommand of orderd.
//
// To add a command, write a function returning its command in a file of its
// own (verify.go is an example) and list that function in commands. Setup
// registers the command's flags and returns the function that runs it; that
// function reads the parsed flags through the variables Setup captured, and
// positional arguments from env.Args.
type command struct {
	// Name is what the user types: "orderd <Name>".
	Name string
	// Summary is one line for the command list.
	Summary string
	// Args is the synopsis after the flags, e.g. "[FILE|-]"; empty when
	// the command takes no positional arguments.
	Args string
	// Help is an optional paragraph printed by "orderd <Name> -h".
	Help string
	// Setup registers flags on fs (which already has -config) and returns
	// the command's body.
	Setup func(fs *flag.FlagSet) func(ctx context.Context, e *env) error
}

// commands lists every command in the order "orderd -h" shows them.
// Commands whose feature is not built yet come from pending.go.
func commands() []command {
	return []command{
		runCommand(),
		sandboxCommand(),
		migrateCommand(),
		reconcileCommand(),
		reportCommand(),
		backupCommand(),
		restoreCommand(),
		clusterCommand(),
		verifyCommand(),
		tailCommand(),
		versionCommand(),
	}
}

// env is what a command gets from run: the process's streams and
// environment, its positional arguments and the config file's path. Nothing
// in it is global, so tests run every command in-process.
type env struct {
	Command string
	Args    []string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Getenv  func(string) string
	// ConfigPath is -config, else $ORDERD_CONFIG, else /etc/orderd/config.yaml.
	ConfigPath string
	// ctx is the command's context (cancelled on SIGINT or SIGTERM); nil
	// in tests that build an env by hand.
	ctx context.Context
}

// LoadConfig loads, resolves and validates the config file for the daemon.
// Its errors are *configError values, which exit with status 2.
func (e *env) LoadConfig() (*Config, error) {
	return e.LoadConfigFor(useDaemon)
}

// LoadConfigFor is LoadConfig for a command that uses only some parts of
// the configuration (see configUse). A signal stops it while it waits —
// on a configuration file that is a FIFO nobody writes, say, or a hung
// network filesystem — instead of going unheard until the read returns.
func (e *env) LoadConfigFor(use configUse) (*Config, error) {
	if e.ctx == nil {
		return LoadConfigFor(e.ConfigPath, e.Getenv, use)
	}
	type loaded struct {
		cfg *Config
		err error
	}
	// Buffered: a load abandoned on a signal can still finish and leave.
	ch := make(chan loaded, 1)
	go func() {
		cfg, err := LoadConfigFor(e.ConfigPath, e.Getenv, use)
		ch <- loaded{cfg, err}
	}()
	select {
	case l := <-ch:
		return l.cfg, l.err
	case <-e.ctx.Done():
		return nil, fmt.Errorf("stopped while reading the configuration %s: %w", e.ConfigPath, context.Cause(e.ctx))
	}
}

// NewLogging builds the process's logger from cfg, writing to e.Stderr.
func (e *env) NewLogging(cfg LogConfig) (*logging, error) {
	return newLogging(cfg, e.Stderr, e.Getenv)
}

// usagef returns a usage error for the command.
func (e *env) usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// usageError is a command line the program cannot act on; exit status 2.
type usageError struct {
	msg string
}

func (e *usageError) Error() string { return e.msg }

// ExitCode implements exitCoder.
func (e *usageError) ExitCode() int { return 2 }

// ExitCode implements exitCoder: a configuration error exits with status 2.
func (e *configError) ExitCode() int { return 2 }

// exitError carries the exit status of a failure the command has already
// reported on its own output (verify's "signature INVALID", say); nothing
// more is printed for it.
type exitError struct {
	code int
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ExitCode implements exitCoder.
func (e *exitError) ExitCode() int { return e.code }

// notBuiltError is returned by commands of the contract whose feature does
// not exist yet. It exits with status 2 rather than pretend to work.
type notBuiltError struct{}

func (notBuiltError) Error() string { return "not built yet" }

// ExitCode implements exitCoder.
func (notBuiltError) ExitCode() int { return 2 }

// exitCoder is an error that decides the process's exit status.
type exitCoder interface {
	ExitCode() int
}

// commandError names the command an error came from; every line of the
// message is prefixed with "orderd <command>: ".
type commandError struct {
	cmd string
	err error
}

func (e *commandError) Error() string {
	prefix := "orderd: "
	if e.cmd != "" {
		prefix = "orderd " + e.cmd + ": "
	}
	lines := strings.Split(e.err.Error(), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

func (e *commandError) Unwrap() error { return e.err }

// exitCode reports err on stderr (unless the command already reported it)
// and returns the process's exit status: 0 for nil, the status an
// exitCoder in err's chain asks for (2 for usage and configuration errors),
// and 1 for anything else.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var done *exitError
	if errors.As(err, &done) {
		return done.code
	}
	fmt.Fprintln(stderr, err.Error())
	var usage *usageError
	if errors.As(err, &usage) {
		hint := "orderd -h"
		var ce *commandError
		if errors.As(err, &ce) && ce.cmd != "" {
			hint = "orderd " + ce.cmd + " -h"
		}
		fmt.Fprintf(stderr, "Run '%s' for usage.\n", hint)
	}
	var ec exitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

// run is the whole program: it parses the global flags, finds the command,
// parses its flags and runs it. ctx is cancelled on SIGINT or SIGTERM. args
// includes the program name, like os.Args.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return dispatch(ctx, commands(), args, getenv, stdin, stdout, stderr)
}

// dispatch is run over a given list of commands, so that tests can check
// the command-line machinery with commands of their own.
func dispatch(ctx context.Context, cmds []command, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	byName := make(map[string]command, len(cmds))
	for _, c := range cmds {
		byName[c.Name] = c
	}

	var configPath string
	global := flag.NewFlagSet("orderd", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	global.StringVar(&configPath, "config", "", "read the configuration from `FILE` (default $"+envConfigPath+", then "+defaultConfigPath+")")
	if len(args) > 0 {
		args = args[1:]
	}
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, cmds, global)
			return nil
		}
		printUsage(stderr, cmds, global)
		return &commandError{err: &usageError{msg: err.Error()}}
	}
	rest := global.Args()
	if len(rest) == 0 {
		printUsage(stderr, cmds, global)
		return &commandError{err: &usageError{msg: "no command given"}}
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) == 0 {
			printUsage(stdout, cmds, global)
			return nil
		}
		// "orderd help verify" is "orderd verify -h".
		name, rest = rest[0], []string{"-h"}
	}
	cmd, ok := byName[name]
	if !ok {
		printUsage(stderr, cmds, global)
		return &commandError{err: &usageError{msg: fmt.Sprintf("unknown command %q", name)}}
	}

	fs := flag.NewFlagSet("orderd "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&configPath, "config", configPath, "read the configuration from `FILE` (default $"+envConfigPath+", then "+defaultConfigPath+")")
	body := cmd.Setup(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(stdout, cmd, fs)
			return nil
		}
		return &commandError{cmd: name, err: &usageError{msg: err.Error()}}
	}

	e := &env{
		Command:    name,
		Args:       fs.Args(),
		Stdin:      stdin,
		Stdout:     stdout,
		Stderr:     stderr,
		Getenv:     getenv,
		ConfigPath: resolveConfigPath(configPath, getenv),
		ctx:        ctx,
	}
	if err := body(ctx, e); err != nil {
		return &commandError{cmd: name, err: err}
	}
	return nil
}

// resolveConfigPath applies the contract's order: -config, then
// $ORDERD_CONFIG, then /etc/orderd/config.yaml.
func resolveConfigPath(flagValue string, getenv func(string) string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := getenv(envConfigPath); v != "" {
		return v
	}
	return defaultConfigPath
}

func printUsage(w io.Writer, cmds []command, global *flag.FlagSet) {
	fmt.Fprintf(w, "orderd receives the payment provider's signed webhooks, stores every order\n")
	fmt.Fprintf(w, "durably, publishes order events to NATS and reconciles what webhooks miss.\n\n")
	fmt.Fprintf(w, "Usage: orderd [-config FILE] <command> [flags]\n\nCommands:\n")
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.Name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\nGlobal flags (also accepted after the command):\n")
	global.SetOutput(w)
	global.PrintDefaults()
	global.SetOutput(io.Discard)
	fmt.Fprintf(w, "\nExit status: 0 ok, 1 runtime failure, 2 usage or configuration error.\n")
	fmt.Fprintf(w, "Run 'orderd <command> -h' for a command's flags.\n")
}

func printCommandUsage(w io.Writer, c command, fs *flag.FlagSet) {
	var flags []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "config" {
			flags = append(flags, f.Name)
		}
	})
	slices.Sort(flags)
	synopsis := "orderd " + c.Name + " [-config FILE]"
	if len(flags) > 0 {
		synopsis += " [flags]"
	}
	if c.Args != "" {
		synopsis += " " + c.Args
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s.\n", synopsis, upperFirst(c.Summary))
	if c.Help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Help))
	}
	fmt.Fprintf(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
