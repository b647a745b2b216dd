//go:build !linux

package main

import "syscall"

// childProcAttr puts a sandbox instance in a process group of its own, so
// that a Ctrl-C on the terminal reaches the sandbox alone, which stops the
// instances in order.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
