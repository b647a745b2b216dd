package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit are set at build time:
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/orderd
//
// They are the only package-level variables of the program, because
// -ldflags -X can set nothing else. When they are empty, versionInfo falls
// back to what the Go toolchain recorded in the binary.
var (
	version string
	commit  string
)

// buildVersion is what "orderd version" prints.
type buildVersion struct {
	Version string
	Commit  string
	Go      string
}

// versionInfo combines the -ldflags values with the build info Go embeds
// (the module version for "go install orderd@v1.2.0", vcs.revision for a
// build inside a git checkout).
func versionInfo(ldVersion, ldCommit string, info *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: ldVersion, Commit: ldCommit, Go: runtime.Version()}
	if info != nil {
		if v.Go == "" {
			v.Go = info.GoVersion
		}
		if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v.Version = info.Main.Version
		}
		if v.Commit == "" {
			var rev, modified string
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" && modified == "true" {
				rev += "-dirty"
			}
			v.Commit = rev
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

// releaseName names this build to the other instances of a cluster: its
// version, and for a build without one its commit.
func releaseName() string {
	info, _ := debug.ReadBuildInfo()
	v := versionInfo(version, commit, info)
	if v.Version == "dev" && v.Commit != "unknown" {
		return "dev@" + v.Commit[:min(12, len(v.Commit))]
	}
	return v.Version
}

func versionCommand() command {
	return command{
		Name:    "version",
		Summary: "print the version, commit and Go version",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(ctx context.Context, e *env) error {
				if err := noArgs(e); err != nil {
					return err
				}
				info, _ := debug.ReadBuildInfo()
				v := versionInfo(version, commit, info)
				fmt.Fprintf(e.Stdout, "orderd %s\ncommit %s\n%s %s/%s\n", v.Version, v.Commit, v.Go, runtime.GOOS, runtime.GOARCH)
				return nil
			}
		},
	}
}
