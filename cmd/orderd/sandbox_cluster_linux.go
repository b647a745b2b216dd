package main

import "syscall"

// childProcAttr puts a sandbox instance in a process group of its own, so
// that a Ctrl-C on the terminal reaches the sandbox alone, which stops the
// instances in order; and has the kernel kill the instance when the
// thread that started it ends, so that none outlives a killed sandbox.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
