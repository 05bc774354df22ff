// Package machinetest holds what the tests of machines of real parts
// (examples/internal/wholemachine and examples/internal/firmware) share:
// fleetd run as a process over a NetBox of the test's, read back through
// NetBox's journal and fleetd's audit lines; Tinkerbell's Workflows as they
// run; and the switch's lldpd and the machines' swtpm.
//
// It is for tests alone, and Linux only, as they are.
package machinetest
