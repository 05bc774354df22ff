package main

import "testing"

// The stand-in takes the inputs fleet's reboot action gives waitdaemon,
// and refuses what the real one could not run.
func TestRun(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	good := map[string]string{"IMAGE": "alpine", "WAIT_SECONDS": "10"}
	if err := run([]string{"reboot"}, env(good)); err != nil {
		t.Errorf("the reboot action's inputs: %v", err)
	}
	for name, c := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"no image":   {[]string{"reboot"}, map[string]string{"WAIT_SECONDS": "10"}},
		"bad wait":   {[]string{"reboot"}, map[string]string{"IMAGE": "alpine", "WAIT_SECONDS": "ten"}},
		"negative":   {[]string{"reboot"}, map[string]string{"IMAGE": "alpine", "WAIT_SECONDS": "-1"}},
		"no command": {nil, good},
	} {
		if err := run(c.args, env(c.env)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
