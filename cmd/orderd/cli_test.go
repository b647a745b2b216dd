package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

// echoCommand is a test command that prints its flag, its arguments and
// the config path it was given, or fails as told.
func echoCommand() command {
	return command{
		Name:    "echo",
		Summary: "print what it was given",
		Args:    "[WORD...]",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			greeting := fs.String("greeting", "hello", "`WORD` to print first")
			fail := fs.String("fail", "", "fail with this kind of error: usage|config|runtime|reported")
			return func(ctx context.Context, e *env) error {
				switch *fail {
				case "usage":
					return e.usagef("-greeting %q is rude", *greeting)
				case "config":
					return &configError{Line: 3, Key: "receiver.listen", Problem: `"x" is not host:port`}
				case "runtime":
					return fmt.Errorf("connect store: %w", errors.New("disk on fire"))
				case "reported":
					fmt.Fprintln(e.Stdout, "verdict: no")
					return &exitError{code: 1}
				}
				fmt.Fprintf(e.Stdout, "%s %s config=%s\n", *greeting, strings.Join(e.Args, " "), e.ConfigPath)
				return nil
			}
		},
	}
}

func TestDispatch(t *testing.T) {
	cmds := []command{echoCommand(), versionCommand()}
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{
			name:       "command with flags and arguments",
			args:       []string{"echo", "-greeting", "hi", "a", "b"},
			wantStdout: "hi a b config=/etc/orderd/config.yaml\n",
		},
		{
			name:       "-config before the command",
			args:       []string{"-config", "/tmp/x.yaml", "echo"},
			wantStdout: "hello  config=/tmp/x.yaml\n",
		},
		{
			name:       "-config after the command",
			args:       []string{"echo", "-config", "/tmp/y.yaml", "w"},
			wantStdout: "hello w config=/tmp/y.yaml\n",
		},
		{
			name:       "$ORDERD_CONFIG when there is no flag",
			env:        map[string]string{"ORDERD_CONFIG": "/srv/orderd.yaml"},
			args:       []string{"echo"},
			wantStdout: "hello  config=/srv/orderd.yaml\n",
		},
		{
			name:       "the flag beats $ORDERD_CONFIG",
			env:        map[string]string{"ORDERD_CONFIG": "/srv/orderd.yaml"},
			args:       []string{"--config=/tmp/z.yaml", "echo"},
			wantStdout: "hello  config=/tmp/z.yaml\n",
		},
		{
			name:       "usage error exits 2 with a hint",
			args:       []string{"echo", "-fail", "usage", "-greeting", "oi"},
			wantCode:   2,
			wantStderr: []string{`orderd echo: -greeting "oi" is rude`, "Run 'orderd echo -h' for usage."},
		},
		{
			name:       "config error exits 2 naming the key",
			args:       []string{"echo", "-fail", "config"},
			wantCode:   2,
			wantStderr: []string{`orderd echo: config: line 3: receiver.listen: "x" is not host:port`},
		},
		{
			name:       "runtime error exits 1",
			args:       []string{"echo", "-fail", "runtime"},
			wantCode:   1,
			wantStderr: []string{"orderd echo: connect store: disk on fire"},
		},
		{
			name:       "a failure the command reported itself prints nothing more",
			args:       []string{"echo", "-fail", "reported"},
			wantCode:   1,
			wantStdout: "verdict: no\n",
		},
		{
			name:       "unknown flag",
			args:       []string{"echo", "-colour"},
			wantCode:   2,
			wantStderr: []string{"orderd echo: flag provided but not defined: -colour", "Run 'orderd echo -h' for usage."},
		},
		{
			name:       "unknown global flag",
			args:       []string{"-verbose", "echo"},
			wantCode:   2,
			wantStderr: []string{"Usage: orderd [-config FILE] <command> [flags]", "orderd: flag provided but not defined: -verbose"},
		},
		{
			name:       "unknown command prints usage",
			args:       []string{"serve"},
			wantCode:   2,
			wantStderr: []string{"Usage: orderd [-config FILE] <command> [flags]", "  echo     print what it was given", `orderd: unknown command "serve"`, "Run 'orderd -h' for usage."},
		},
		{
			name:       "no command prints usage",
			args:       nil,
			wantCode:   2,
			wantStderr: []string{"Usage: orderd", "orderd: no command given"},
		},
		{
			name:       "-h lists the commands on stdout",
			args:       []string{"-h"},
			wantStdout: "Commands:\n  echo     print what it was given\n  version  print the version, commit and Go version\n",
		},
		{
			name:       "command -h prints its flags on stdout",
			args:       []string{"echo", "-h"},
			wantStdout: "Usage: orderd echo [-config FILE] [flags] [WORD...]\n\nPrint what it was given.\n\nFlags:\n  -config FILE",
		},
		{
			name:       "help COMMAND is COMMAND -h",
			args:       []string{"help", "echo"},
			wantStdout: "  -greeting WORD\n    \tWORD to print first (default \"hello\")\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runWith(t, cmds, tt.env, nil, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if tt.wantStdout != "" && !strings.Contains(r.stdout, tt.wantStdout) {
				t.Errorf("stdout\n%s\ndoes not contain\n%s", r.stdout, tt.wantStdout)
			}
			if tt.wantStdout == "" && r.stdout != "" {
				t.Errorf("unexpected stdout: %s", r.stdout)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr\n%s\ndoes not contain %q", r.stderr, w)
				}
			}
			if len(tt.wantStderr) == 0 && r.stderr != "" {
				t.Errorf("unexpected stderr: %s", r.stderr)
			}
		})
	}
}

// TestRun_Help checks that every command of the contract exists and that
// "-h" prints its flags and exits 0.
func TestRun_Help(t *testing.T) {
	contract := map[string][]string{
		"run":       nil,
		"sandbox":   nil,
		"migrate":   nil,
		"reconcile": {"-job", "-rate"},
		"report":    {"-from DATE", "-to DATE", "-format", "-o FILE"},
		"verify":    {"-pubkey FILE", "-signature B64", "[FILE|-]"},
		"tail":      {"-subject S"},
		"version":   nil,
	}
	top := runOrderd(t, nil, nil, "-h")
	if top.code != 0 {
		t.Fatalf("orderd -h exited %d: %s", top.code, top.stderr)
	}
	for name, flags := range contract {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(top.stdout, "\n  "+name+" ") {
				t.Errorf("orderd -h does not list %s:\n%s", name, top.stdout)
			}
			r := runOrderd(t, nil, nil, name, "-h")
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("orderd %s -h: exit %d, stderr %s", name, r.code, r.stderr)
			}
			for _, want := range append([]string{"Usage: orderd " + name, "-config FILE"}, flags...) {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("orderd %s -h does not show %q:\n%s", name, want, r.stdout)
				}
			}
		})
	}
}

func TestPending(t *testing.T) {
	dir := t.TempDir()
	valid := writeFile(t, dir, "valid.yaml", validYAML)
	invalid := writeFile(t, dir, "invalid.yaml", withLines("receiver:\n  listen: nowhere"))
	cmds := []command{{
		Name:    "future",
		Summary: "a feature that is not built yet",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return pending(true, noArgs)
		},
	}}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"says so and exits 2", []string{"future", "-config", valid}, 2, "orderd future: not built yet\n"},
		{"config errors come first", []string{"future", "-config", invalid}, 2, `receiver.listen: "nowhere" is not host:port`},
		{"arguments are checked", []string{"future", "-config", valid, "extra"}, 2, `orderd future: unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runWith(t, cmds, nil, nil, tt.args...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tt.wantCode, tt.want)
			}
		})
	}
}

func TestReconcile_RateFlag(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "config.yaml", validYAML)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-rate", "-1"}, "orderd reconcile: -rate -1 must be a positive number"},
		{[]string{"-rate", "NaN"}, "orderd reconcile: -rate NaN must be a positive number"},
		{[]string{"-rate", "11"}, "orderd reconcile: -rate 11 is above provider.rate_limit (10)"},
		{[]string{"-rate", "fast"}, `invalid value "fast" for flag -rate`},
	}
	for _, tt := range tests {
		r := runOrderd(t, nil, nil, append([]string{"reconcile", "-config", cfg}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("reconcile %v: exit %d, stderr %q; want 2 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}
