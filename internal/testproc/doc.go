// Package testproc starts the programs the test harnesses run (etcd,
// kube-apiserver, tinkerbell, containerd, dockerd, Tinkerbell's agent) as
// children the kernel stops when the test binary dies, waits until they
// serve (WaitReady, HTTPReady), and stops them; GoBuild builds this
// repository's programs, and Tool finds or builds a tool of its modules.
//
// # Lifetime
//
// On Linux a child started here gets SIGTERM should the test binary die
// without stopping it (a panic, a -timeout, a SIGKILL). Linux ties that
// signal to the thread that started the child, and Go ends a thread whose
// goroutine returns locked to it: Start starts each child from a thread of
// its own, locked until the child has exited, so that no unrelated test
// that locked and left a thread can signal a child mid-test.
package testproc
