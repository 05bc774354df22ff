package tinktest

import (
	"testing"
	"time"
)

// The messages are protobuf's wire format: a report's fields come back
// as written, and the zero time is the Timestamp of seconds -62135596800
// (0001-01-01), as the agent's timestamppb.New writes it, which
// tink-server turns into no time at all.
func TestReportEncoding(t *testing.T) {
	var b []byte
	b = appendString(b, 1, "ns/wf")
	b = appendVarint(b, 6, states["RUNNING"])
	b = appendBytes(b, 7, timestamp(time.Time{}))
	b = appendBytes(b, 10, appendString(nil, 1, "running action"))
	got := map[int]any{}
	if err := eachField(b, func(num int, v uint64, f []byte) {
		if f != nil {
			got[num] = string(f)
		} else {
			got[num] = v
		}
	}); err != nil {
		t.Fatal(err)
	}
	if got[1] != "ns/wf" || got[6] != uint64(2) || got[10] != string(appendString(nil, 1, "running action")) {
		t.Errorf("fields %v", got)
	}
	var secs int64
	if err := eachField([]byte(got[7].(string)), func(num int, v uint64, _ []byte) {
		if num == 1 {
			secs = int64(v)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if secs != -62135596800 {
		t.Errorf("zero time's seconds = %d, want -62135596800", secs)
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 'a'}, {0x08}, {0x0b}} {
		if err := eachField(bad, func(int, uint64, []byte) {}); err == nil {
			t.Errorf("eachField(%x) = nil, want an error", bad)
		}
	}
}
