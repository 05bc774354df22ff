package main

import (
	"encoding/binary"
	"testing"
)

// specIDEvent returns the first event of a crypto-agile event log, the
// Spec ID event, naming the algorithms algs.
func specIDEvent(algs ...uint16) []byte {
	var data []byte
	data = append(data, "Spec ID Event03\x00"...)
	data = binary.LittleEndian.AppendUint32(data, 0) // platform class
	data = append(data, 0, 2, 0, 2)                  // version 2.0, errata 0, UINTN size
	data = binary.LittleEndian.AppendUint32(data, uint32(len(algs)))
	for _, a := range algs {
		data = binary.LittleEndian.AppendUint16(data, a)
		data = binary.LittleEndian.AppendUint16(data, 32)
	}
	data = append(data, 0) // vendor info size
	var ev []byte
	ev = binary.LittleEndian.AppendUint32(ev, 0)          // PCR 0
	ev = binary.LittleEndian.AppendUint32(ev, 0x00000003) // EV_NO_ACTION
	ev = append(ev, make([]byte, 20)...)
	ev = binary.LittleEndian.AppendUint32(ev, uint32(len(data)))
	return append(ev, data...)
}

func TestLogBanks(t *testing.T) {
	for _, tt := range []struct {
		log  []byte
		want string
	}{
		{specIDEvent(0x0004, 0x000b), "sha1,sha256"},
		{specIDEvent(0x000b), "sha256"},
		{specIDEvent(0x0004, 0x000b, 0x000c, 0x000d), "sha1,sha256,sha384,sha512"},
		{specIDEvent(0x0099), "0x0099"},
		{specIDEvent(0x0004)[:40], "unknown (no Spec ID Event03)"},
		{specIDEvent(0x0004, 0x000b)[:32+28+2], "unknown (a short Spec ID Event03)"},
		{nil, "unknown (no Spec ID Event03)"},
	} {
		if got := logBanks(tt.log); got != tt.want {
			t.Errorf("logBanks(%d bytes) = %q, want %q", len(tt.log), got, tt.want)
		}
	}
}
