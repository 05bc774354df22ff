package attest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// noPeerBound leaves the claims of one source address unbounded: the
// tests of the other rules prove every claim from one address.
const noPeerBound = math.MaxInt

var waitT0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// tpmClaim is a claim of serial by the TPM numbered tpm, proven at
// waitT0 plus at.
func tpmClaim(serial string, tpm int, at time.Duration) Claim {
	return Claim{
		Serial:  serial,
		MAC:     net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1},
		RSA2048: fmt.Sprintf("%064x", tpm),
		ECCP256: fmt.Sprintf("%064x", tpm+1<<32),
		Peer:    "10.0.0.5:41234",
		Proven:  waitT0.Add(at),
	}
}

// sameClaim reports whether a and b hold the same facts.
func sameClaim(a, b Claim) bool { return reflect.DeepEqual(a, b) }

// tpmsOf returns the TPM numbers of claims, in their order.
func tpmsOf(t *testing.T, claims []Claim) []int {
	t.Helper()
	out := make([]int, len(claims))
	for i, c := range claims {
		if _, err := fmt.Sscanf(c.RSA2048, "%x", &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkCounts fails t when the store's order and its index disagree or a
// bound is broken, and returns how many claims it holds.
func checkCounts(t *testing.T, w *waitingStore) int {
	t.Helper()
	sum := 0
	holding := make([]int, w.perSerial+1)
	for s, own := range w.serials {
		n := len(own.claims)
		if n == 0 || n > w.perSerial {
			t.Fatalf("serial %s holds %d claims; the bound is %d", s, n, w.perSerial)
		}
		for _, e := range own.claims {
			if we := e.Value.(*waitingEntry); we.of != own || we.claim.Serial != s {
				t.Fatalf("a claim of %s is indexed under %s", we.claim.Serial, s)
			}
		}
		sum += n
		holding[n]++
	}
	if !slices.Equal(holding, w.holding) {
		t.Fatalf("serials by claims held: %v, counted %v", holding, w.holding)
	}
	if sum != w.order.Len() || sum > w.max {
		t.Fatalf("the serials hold %d claims, the order %d; the bound is %d", sum, w.order.Len(), w.max)
	}
	return sum
}

// A second TPM's claim under a serial waits beside the first, which it
// neither replaces nor hides. The same TPM claiming again replaces its
// own claim, which becomes the newest and waits the TTL from its new
// proof.
func TestWaitingSecondTPMDoesNotReplace(t *testing.T) {
	w := newWaitingStore(time.Hour, 1024, 8, noPeerBound)
	w.put(tpmClaim("S", 1, 0), waitT0)
	w.put(tpmClaim("S", 2, time.Minute), waitT0.Add(time.Minute))
	got := w.get("S", waitT0.Add(2*time.Minute))
	if !slices.Equal(tpmsOf(t, got), []int{1, 2}) {
		t.Fatalf("S's claims come from TPMs %v, want 1 then 2", tpmsOf(t, got))
	}
	if !slices.EqualFunc(got, []Claim{tpmClaim("S", 1, 0), tpmClaim("S", 2, time.Minute)}, sameClaim) {
		t.Errorf("claims %+v", got)
	}
	if w.get("other", waitT0) != nil {
		t.Error("a serial nobody claimed has claims")
	}

	again := tpmClaim("S", 1, 30*time.Minute)
	again.MAC = net.HardwareAddr{0x52, 0x54, 0, 0, 0, 0x99}
	lldp := &LLDP{PortID: "Port 7"}
	again.LLDP = lldp
	w.put(again, again.Proven)
	got = w.get("S", waitT0.Add(31*time.Minute))
	if !slices.Equal(tpmsOf(t, got), []int{2, 1}) || !bytes.Equal(got[1].MAC, again.MAC) {
		t.Fatalf("after TPM 1 claimed again: TPMs %v, %+v; want 2, then 1 with its new MAC", tpmsOf(t, got), got)
	}
	if checkCounts(t, w) != 2 {
		t.Error("the refresh added a claim")
	}
	// Neither the caller's claim nor the stored one changes the other:
	// the store keeps its own MAC and switch port.
	again.MAC[5], lldp.PortID = 0xff, "changed by the caller"
	got[1].MAC[4], got[1].LLDP.PortID = 0xee, "changed by a reader"
	if got := w.get("S", waitT0.Add(31*time.Minute)); got[1].MAC.String() != "52:54:00:00:00:99" || got[1].LLDP.PortID != "Port 7" {
		t.Errorf("the store holds MAC %s, port %q; want 52:54:00:00:00:99, Port 7", got[1].MAC, got[1].LLDP.PortID)
	}
	// TPM 2's claim expires an hour after its proof; TPM 1's, renewed,
	// an hour after its new one.
	if got := w.get("S", waitT0.Add(61*time.Minute)); !slices.Equal(tpmsOf(t, got), []int{1}) {
		t.Errorf("at 61 min: TPMs %v, want 1", tpmsOf(t, got))
	}
	if got := w.get("S", waitT0.Add(90*time.Minute)); got != nil {
		t.Errorf("at 90 min: %d claims, want none", len(got))
	}
	if checkCounts(t, w) != 0 {
		t.Error("expired claims are kept")
	}
}

// Claims expire WaitingTTL after their proof, and an expired claim is
// never answered, even before it is pruned.
func TestWaitingExpiry(t *testing.T) {
	w := newWaitingStore(time.Hour, 1024, 8, noPeerBound)
	w.put(tpmClaim("A", 1, 0), waitT0)
	w.put(tpmClaim("B", 2, 10*time.Minute), waitT0.Add(10*time.Minute))
	if got := w.get("A", waitT0.Add(time.Hour-time.Nanosecond)); len(got) != 1 {
		t.Error("A expired before its TTL")
	}
	if got := w.get("A", waitT0.Add(time.Hour)); got != nil {
		t.Error("A waits at its TTL")
	}
	if got := w.get("B", waitT0.Add(time.Hour)); len(got) != 1 {
		t.Error("B expired with A")
	}
	// A claim proven earlier than one put before it (proofs finish out of
	// order) is not answered once it expired.
	w.put(tpmClaim("C", 3, 20*time.Minute), waitT0.Add(20*time.Minute))
	w.put(tpmClaim("D", 4, 15*time.Minute), waitT0.Add(20*time.Minute))
	if got := w.get("D", waitT0.Add(76*time.Minute)); got != nil {
		t.Error("D waits past its TTL")
	}
	if got := w.get("C", waitT0.Add(76*time.Minute)); len(got) != 1 {
		t.Error("C is gone before its TTL")
	}
	// Expired claims make room before any claim is evicted.
	w = newWaitingStore(time.Hour, 4, 8, noPeerBound)
	for i := range 4 {
		w.put(tpmClaim(fmt.Sprint("E", i), i, 0), waitT0)
	}
	w.put(tpmClaim("late", 9, 2*time.Hour), waitT0.Add(2*time.Hour))
	if n := checkCounts(t, w); n != 1 {
		t.Errorf("the store holds %d claims, want only the one that has not expired", n)
	}
}

// A serial holds at most MaxWaitingPerSerial claims: a flood of TPMs under
// one serial evicts only that serial's newer claims, and never its older
// half.
func TestWaitingPerSerialBound(t *testing.T) {
	w := newWaitingStore(time.Hour, 1024, 8, noPeerBound)
	w.put(tpmClaim("OTHER", 1000, 0), waitT0)
	for i := range 100 {
		w.put(tpmClaim("S", i, time.Duration(i)*time.Second), waitT0.Add(time.Duration(i)*time.Second))
	}
	now := waitT0.Add(2 * time.Minute)
	if got := tpmsOf(t, w.get("S", now)); !slices.Equal(got, []int{0, 1, 2, 3, 96, 97, 98, 99}) {
		t.Errorf("after 100 TPMs claimed S: TPMs %v, want the first 4 and the last 4", got)
	}
	if got := w.get("OTHER", now); len(got) != 1 {
		t.Error("a flood under S evicted another serial's claim")
	}
	if n := checkCounts(t, w); n != 9 {
		t.Errorf("the store holds %d claims, want 9", n)
	}
	// The bound is at most MaxWaiting.
	if w := newWaitingStore(time.Hour, 4, 8, noPeerBound); w.perSerial != 4 {
		t.Errorf("per serial %d with MaxWaiting 4", w.perSerial)
	}
}

// 10,000 claims under other serials, one TPM each, do not evict a claim
// that waited in the older half of the store; a claim that came once the
// store was full outlives exactly MaxWaiting - MaxWaiting/2 - 1 of them.
func TestWaitingFloodUnderOtherSerials(t *testing.T) {
	const n = DefaultMaxWaiting
	w := newWaitingStore(DefaultWaitingTTL, n, DefaultMaxWaitingPerSerial, noPeerBound)
	at := time.Duration(0)
	put := func(serial string, tpm int) {
		at += time.Millisecond
		w.put(tpmClaim(serial, tpm, at), waitT0.Add(at))
	}
	put("MACHINE", 1)
	for i := range 10_000 {
		put(fmt.Sprint("FLOOD-", i), 100+i)
	}
	now := waitT0.Add(at)
	if got := w.get("MACHINE", now); len(got) != 1 || tpmsOf(t, got)[0] != 1 {
		t.Fatalf("the machine's claim is gone after 10,000 claims under other serials: %v", got)
	}
	// Exactly: the machine's and the flood's first 511 (the older half),
	// and the flood's last 512.
	var want []string
	want = append(want, "MACHINE")
	for i := range n/2 - 1 {
		want = append(want, fmt.Sprint("FLOOD-", i))
	}
	for i := 10_000 - (n - n/2); i < 10_000; i++ {
		want = append(want, fmt.Sprint("FLOOD-", i))
	}
	var have []string
	for e := w.order.Front(); e != nil; e = e.Next() {
		have = append(have, e.Value.(*waitingEntry).claim.Serial)
	}
	if !slices.Equal(have, want) {
		t.Errorf("the store holds %d claims, want %d: the older half and the newest", len(have), len(want))
	}

	// A claim that came into the full store outlives the next n - n/2 - 1
	// claims, and the one after evicts it.
	put("LATE", 2)
	for i := range n - n/2 - 1 {
		put(fmt.Sprint("FLOOD2-", i), 20_000+i)
	}
	if got := w.get("LATE", waitT0.Add(at)); len(got) != 1 {
		t.Fatalf("LATE is gone before %d claims came after it", n-n/2-1)
	}
	put("FLOOD2-last", 30_000)
	if got := w.get("LATE", waitT0.Add(at)); got != nil {
		t.Errorf("LATE waits after %d claims came after it", n-n/2)
	}
	if got := w.get("MACHINE", waitT0.Add(at)); len(got) != 1 {
		t.Error("the machine's claim is gone")
	}
	checkCounts(t, w)
}

// When the store is full, the claim that goes comes from the serials that
// hold the most claims: a serial's only claim, even the newest in the
// store, stays while another serial holds more than one.
func TestWaitingFullStoreEvictsFromTheLargest(t *testing.T) {
	const n = 16
	w := newWaitingStore(time.Hour, n, 8, noPeerBound)
	at := time.Duration(0)
	put := func(serial string, tpm int) {
		at += time.Millisecond
		w.put(tpmClaim(serial, tpm, at), waitT0.Add(at))
	}
	for i := range n / 2 {
		put(fmt.Sprint("PAIR-", i), 2*i)
		put(fmt.Sprint("PAIR-", i), 2*i+1)
	}
	put("MACHINE", 1000) // the newest claim, in a full store
	// 10,000 claims by new TPMs under five other serials.
	for i := range 10_000 {
		put(fmt.Sprint("FLOOD-", i%5), 2000+i)
		if w.get("MACHINE", waitT0.Add(at)) == nil {
			t.Fatalf("claim %d of the flood evicted the machine's only claim", i)
		}
	}
	// No serial lost its last claim: 14 serials share 16 places, so one
	// always holds more than one.
	if n := checkCounts(t, w); n != 16 || len(w.serials) != 14 {
		t.Errorf("the store holds %d claims of %d serials, want 16 of 14", n, len(w.serials))
	}
}

// waitModel is the store's rule written plainly, to check the store
// against: claims in a slice, oldest first.
type waitModel struct {
	ttl            time.Duration
	max, perSerial int
	claims         []Claim
}

func (m *waitModel) prune(now time.Time) {
	m.claims = slices.DeleteFunc(m.claims, func(c Claim) bool { return !now.Before(c.Proven.Add(m.ttl)) })
}

// evictAmong removes, of the claims for which in is true (oldest first),
// the one after the first half.
func (m *waitModel) evictAmong(in func(Claim) bool) {
	var idx []int
	for i, c := range m.claims {
		if in(c) {
			idx = append(idx, i)
		}
	}
	m.claims = slices.Delete(m.claims, idx[len(idx)/2], idx[len(idx)/2]+1)
}

func (m *waitModel) count(serial string) int {
	n := 0
	for _, c := range m.claims {
		if c.Serial == serial {
			n++
		}
	}
	return n
}

func (m *waitModel) put(c Claim, now time.Time) {
	// Expired claims are gone (the store keeps an out-of-order one a
	// little longer, but never answers it; the random test proves in
	// order).
	m.prune(now)
	m.claims = slices.DeleteFunc(m.claims, func(o Claim) bool { return o.Serial == c.Serial && sameTPM(o, c) })
	if m.count(c.Serial) >= m.perSerial {
		m.evictAmong(func(o Claim) bool { return o.Serial == c.Serial })
	}
	if len(m.claims) >= m.max {
		most := 0
		for _, o := range m.claims {
			most = max(most, m.count(o.Serial))
		}
		m.evictAmong(func(o Claim) bool { return m.count(o.Serial) == most })
	}
	m.claims = append(m.claims, c)
}

func (m *waitModel) get(serial string, now time.Time) []Claim {
	var out []Claim
	for _, c := range m.claims {
		if c.Serial == serial && now.Before(c.Proven.Add(m.ttl)) {
			out = append(out, c)
		}
	}
	return out
}

// The store follows its documented rule exactly: random claims by few
// serials and TPMs, with time passing, against the rule written plainly.
func TestWaitingRule(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 1))
		max, perSerial := 1+r.IntN(12), 1+r.IntN(5)
		ttl := time.Duration(20+r.IntN(200)) * time.Second
		w := newWaitingStore(ttl, max, perSerial, noPeerBound)
		m := &waitModel{ttl: ttl, max: max, perSerial: min(perSerial, max)}
		serials := 1 + r.IntN(8)
		now := waitT0
		for step := range 1500 {
			now = now.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
			serial := fmt.Sprint("S", r.IntN(serials))
			if r.IntN(4) == 0 {
				if got, want := w.get(serial, now), m.get(serial, now); !slices.EqualFunc(got, want, sameClaim) {
					t.Fatalf("seed %d step %d: get(%s) = TPMs %v, want %v", seed, step, serial, tpmsOf(t, got), tpmsOf(t, want))
				}
				continue
			}
			c := tpmClaim(serial, r.IntN(6), now.Sub(waitT0))
			w.put(c, now)
			m.put(c, now)
			checkCounts(t, w)
			var have []Claim
			for e := w.order.Front(); e != nil; e = e.Next() {
				have = append(have, e.Value.(*waitingEntry).claim)
			}
			if !slices.EqualFunc(have, m.claims, sameClaim) {
				t.Fatalf("seed %d step %d (max %d, per serial %d): after a claim of %s by TPM %d the store holds\n%v\nwant\n%v",
					seed, step, max, perSerial, serial, tpmsOf(t, []Claim{c})[0], summary(have), summary(m.claims))
			}
		}
	}
}

func summary(cs []Claim) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s/%s ", c.Serial, strings.TrimLeft(c.RSA2048, "0"))
	}
	return b.String()
}

// Puts and gets from many goroutines keep the bounds (run with -race).
func TestWaitingConcurrent(t *testing.T) {
	w := newWaitingStore(time.Hour, 64, 4, noPeerBound)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				serial := fmt.Sprint("S", (g*7+i)%40)
				w.put(tpmClaim(serial, i%9, time.Duration(i)*time.Millisecond), waitT0.Add(time.Duration(i)*time.Millisecond))
				if got := w.get(serial, waitT0.Add(time.Duration(i)*time.Millisecond)); len(got) == 0 || len(got) > 4 {
					t.Errorf("%s: %d claims right after a put", serial, len(got))
					return
				}
			}
		})
	}
	wg.Wait()
	if n := checkCounts(t, w); n != 64 {
		t.Errorf("the store holds %d claims, want 64", n)
	}
}

// BenchmarkWaitingFlood is a claim under a new serial into a full store of
// the default bounds, every serial holding one claim: the costliest put.
func BenchmarkWaitingFlood(b *testing.B) {
	w := newWaitingStore(DefaultWaitingTTL, DefaultMaxWaiting, DefaultMaxWaitingPerSerial, noPeerBound)
	claims := make([]Claim, 4096)
	for i := range claims {
		claims[i] = tpmClaim(fmt.Sprint("FLOOD-", i), i, 0)
	}
	for _, c := range claims[:DefaultMaxWaiting] {
		w.put(c, waitT0)
	}
	for i := 0; b.Loop(); i++ {
		w.put(claims[i%len(claims)], waitT0)
	}
}

// A claim's text for an operator, in UTC, and the approver API's wire
// format: the field names, the MAC as text, and the text.
func TestWaitingClaimWire(t *testing.T) {
	c := Claim{Serial: "FLK-0001", MAC: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}, Peer: "10.0.0.5:41234",
		Proven: time.Date(2026, 12, 2, 13, 0, 0, 0, time.FixedZone("CET", 3600)), RSA2048: strings.Repeat("a", 64),
		LLDP: &LLDP{ChassisIDSubtype: 4, ChassisID: "74:83:c2:00:00:01", PortIDSubtype: 7, PortID: "Port 7", PortDescription: "node port", SystemName: "usw-pro-24"}}
	wantText := "serial FLK-0001, MAC 52:54:00:12:34:56, from 10.0.0.5:41234 at 2026-12-02T12:00:00Z\n" +
		"switch \"usw-pro-24\" (chassis 74:83:c2:00:00:01), port \"Port 7\" \"node port\"\n" +
		"proven RSA-2048 EK " + strings.Repeat("a", 64) + "\n"
	if c.String() != wantText {
		t.Errorf("String:\n%s\nwant:\n%s", c.String(), wantText)
	}
	got, err := json.Marshal(c.Wire())
	if err != nil {
		t.Fatal(err)
	}
	text, _ := json.Marshal(wantText)
	want := `{"serial":"FLK-0001","mac":"52:54:00:12:34:56","peer":"10.0.0.5:41234","proven":"2026-12-02T12:00:00Z",` +
		`"lldp":{"chassis_id_subtype":4,"chassis_id":"74:83:c2:00:00:01","port_id_subtype":7,"port_id":"Port 7","port_description":"node port","system_name":"usw-pro-24"},` +
		`"ek_rsa2048":"` + strings.Repeat("a", 64) + `","ek_eccp256":"","text":` + string(text) + `}`
	if string(got) != want {
		t.Fatalf("wire:\n%s\nwant:\n%s", got, want)
	}
	var back WaitingClaim
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.String() != c.String() {
		t.Errorf("decoded text %q, want %q", back.String(), c.String())
	}
	back.Text = ""
	if back.String() != c.String() {
		t.Errorf("text made from the fields %q, want %q", back.String(), c.String())
	}
	c.LLDP = nil
	if !strings.Contains(c.String(), "no LLDP frame") {
		t.Error("no LLDP line")
	}
}

// One address proving claims under 1,000 serials holds at most perPeer of
// them, the oldest half of its first perPeer among them, wherever its
// ports; a claim from another address is never evicted by that flood.
func TestWaitingBoundPerSourceAddress(t *testing.T) {
	w := newWaitingStore(time.Hour, 1024, 8, 16)
	other := tpmClaim("LEGIT", 9999, 0)
	other.Peer = "10.0.0.9:5000"
	w.put(other, waitT0)
	for i := range 1000 {
		c := tpmClaim(fmt.Sprintf("FLOOD-%04d", i), i, time.Duration(i)*time.Millisecond)
		c.Peer = fmt.Sprintf("10.0.0.66:%d", 1024+i)
		w.put(c, waitT0.Add(time.Duration(i)*time.Millisecond))
	}
	checkCounts(t, w)
	if got := w.get("LEGIT", waitT0.Add(time.Second)); len(got) != 1 {
		t.Errorf("the other address's claim: %d waiting, want 1", len(got))
	}
	var flood []int
	for i := range 1000 {
		if len(w.get(fmt.Sprintf("FLOOD-%04d", i), waitT0.Add(time.Second))) > 0 {
			flood = append(flood, i)
		}
	}
	if len(flood) != 16 || !slices.Equal(flood[:8], []int{0, 1, 2, 3, 4, 5, 6, 7}) || flood[15] != 999 {
		t.Errorf("the flood's claims that wait: %v; want 16, its first 8 and its last among them", flood)
	}
	if n := len(w.peers["10.0.0.66"].claims); n != 16 {
		t.Errorf("the flood's address holds %d claims in its index, want 16", n)
	}
}
