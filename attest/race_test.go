//go:build race

package attest_test

const raceEnabled = true
