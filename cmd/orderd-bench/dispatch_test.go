package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestDispatch_usage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no subcommand", nil, []string{"daemon", "load", "scale"}},
		{"-h", []string{"-h"}, []string{"daemon", "load", "scale"}},
		{"unknown", []string{"sweep"}, []string{`unknown subcommand "sweep"`, "daemon"}},
		{"flag before subcommand", []string{"-key", "k.pem"}, []string{`unknown subcommand "-key"`}},
		{"daemon usage", []string{"daemon", "-key", "k.pem"}, []string{"orderd-bench daemon:", "-key goes with -url"}},
		{"load usage", []string{"load", "-flat"}, []string{"orderd-bench load:", "nothing to do"}},
		{"scale usage", []string{"scale", "-size", "3"}, []string{"orderd-bench scale:", "-size must be at least 100"}},
		{"scale -h", []string{"scale", "-h"}, []string{"Usage of orderd-bench scale", "-migration"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := dispatch(t.Context(), tc.args, &out, &errOut); code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
			if out.Len() != 0 {
				t.Errorf("stdout not empty: %q", out.String())
			}
		})
	}
}

// TestDispatch_loadGenKey runs a subcommand to completion through the
// dispatcher: "load -gen-key-out" writes the key pair cluster.sh and
// load.sh use.
func TestDispatch_loadGenKey(t *testing.T) {
	key := filepath.Join(t.TempDir(), "k.pem")
	var out, errOut bytes.Buffer
	if code := dispatch(t.Context(), []string{"load", "-gen-key-out", key, "-key-type", "rsa"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "wrote "+key+" and "+key+".pub") {
		t.Errorf("stderr = %q", errOut.String())
	}
}
