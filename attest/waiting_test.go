package attest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestWaitingStore(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	w := newWaitingStore(time.Hour, 3)
	for i := 0; i < 4; i++ {
		w.put(Claim{Serial: fmt.Sprintf("S%d", i), Proven: t0.Add(time.Duration(i) * time.Minute)})
	}
	if _, ok := w.get("S0", t0); ok {
		t.Error("the oldest claim was not evicted at the bound")
	}
	for _, s := range []string{"S1", "S2", "S3"} {
		if _, ok := w.get(s, t0.Add(5*time.Minute)); !ok {
			t.Errorf("%s does not wait", s)
		}
	}
	// A new claim for a serial replaces its old one.
	lldp := &LLDP{PortID: "7"}
	w.put(Claim{Serial: "S1", RSA2048: "new", LLDP: lldp, Proven: t0.Add(10 * time.Minute)})
	c, ok := w.get("S1", t0.Add(10*time.Minute))
	if !ok || c.RSA2048 != "new" {
		t.Fatalf("S1 = %+v, %v", c, ok)
	}
	c.LLDP.PortID = "changed"
	if lldp.PortID != "7" {
		t.Error("a caller changed the stored claim")
	}
	// Claims expire after the TTL, counted from their proof.
	if _, ok := w.get("S2", t0.Add(62*time.Minute)); ok {
		t.Error("S2 waits past its TTL")
	}
	if _, ok := w.get("S1", t0.Add(62*time.Minute)); !ok {
		t.Error("S1, renewed, expired")
	}
	if w.order.Len() != len(w.by) {
		t.Errorf("the order holds %d claims, the index %d", w.order.Len(), len(w.by))
	}
}

func TestClaimString(t *testing.T) {
	c := Claim{Serial: "FLK-0001", MAC: "52:54:00:12:34:56", Peer: "10.0.0.5:41234",
		Proven: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), RSA2048: strings.Repeat("a", 64),
		LLDP: &LLDP{SystemName: "usw-pro-24", ChassisID: "74:83:c2:00:00:01", PortID: "Port 7", PortDescription: "node port"}}
	want := "serial FLK-0001, MAC 52:54:00:12:34:56, from 10.0.0.5:41234 at 2026-12-02T12:00:00Z\n" +
		"switch \"usw-pro-24\" (chassis 74:83:c2:00:00:01), port \"Port 7\" \"node port\"\n" +
		"proven RSA-2048 EK " + strings.Repeat("a", 64) + "\n"
	if c.String() != want {
		t.Errorf("String:\n%s\nwant:\n%s", c.String(), want)
	}
	c.LLDP = nil
	if !strings.Contains(c.String(), "no LLDP frame") {
		t.Error("no LLDP line")
	}
}
