package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionInfo(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{
			GoVersion: "go1.26.0",
			Main:      debug.Module{Path: "orderd", Version: "(devel)"},
			Settings: []debug.BuildSetting{
				{Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: rev},
				{Key: "vcs.modified", Value: modified},
			},
		}
	}
	tests := []struct {
		name       string
		ldVersion  string
		ldCommit   string
		info       *debug.BuildInfo
		wantVer    string
		wantCommit string
	}{
		{name: "ldflags win", ldVersion: "v1.2.0", ldCommit: "abc123", info: vcs("def456", "false"), wantVer: "v1.2.0", wantCommit: "abc123"},
		{name: "commit from vcs build info", info: vcs("def456", "false"), wantVer: "dev", wantCommit: "def456"},
		{name: "modified work tree", info: vcs("def456", "true"), wantVer: "dev", wantCommit: "def456-dirty"},
		{name: "module version from go install", info: &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}, wantVer: "v0.3.1", wantCommit: "unknown"},
		{name: "nothing known", info: nil, wantVer: "dev", wantCommit: "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := versionInfo(tt.ldVersion, tt.ldCommit, tt.info)
			if got.Version != tt.wantVer || got.Commit != tt.wantCommit || got.Go != runtime.Version() {
				t.Errorf("versionInfo = %+v, want version %q commit %q go %q", got, tt.wantVer, tt.wantCommit, runtime.Version())
			}
		})
	}
}

func TestRun_Version(t *testing.T) {
	r := runOrderd(t, nil, nil, "version")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "orderd ") || !strings.HasPrefix(lines[1], "commit ") ||
		lines[2] != runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("orderd version printed:\n%s", r.stdout)
	}
	if r := runOrderd(t, nil, nil, "version", "extra"); r.code != 2 {
		t.Errorf("orderd version extra: exit %d, want 2", r.code)
	}
}

// TestBinary_VersionLdflags builds the real binary with -ldflags -X, the
// way releases are built, and runs it.
func TestBinary_VersionLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "orderd")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin,
		"-ldflags", "-X main.version=v9.8.7 -X main.commit=0123abcd", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin, "version").Output()
	if err != nil {
		t.Fatalf("orderd version: %v", err)
	}
	want := "orderd v9.8.7\ncommit 0123abcd\n" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if string(out) != want {
		t.Errorf("orderd version printed\n%s\nwant\n%s", out, want)
	}

	// The exit status reaches the shell: 2 for an unknown command.
	err = exec.CommandContext(t.Context(), bin, "frobnicate").Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("orderd frobnicate: %v, want exit status 2", err)
	}
}
