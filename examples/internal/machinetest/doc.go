// Package machinetest holds what the tests of machines of real parts
// (examples/internal/wholemachine and examples/internal/firmware) share:
// the programs they build (BuildAll); fleetd run as a process over a
// NetBox of the test's, read back through NetBox's journal and fleetd's
// audit lines; Tinkerbell's Workflows as they run (Follow); and the
// processes of the switch and the machines, lldpd and swtpm (Run).
//
// It is for tests alone, and Linux only, as they are.
package machinetest
