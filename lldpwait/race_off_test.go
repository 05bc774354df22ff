//go:build !race

package lldpwait

const raceEnabled = false
