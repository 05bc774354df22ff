package attest

import (
	"container/list"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// waitingStore keeps the pending-approval claims: every distinct TPM's
// claim of each serial, at most perSerial of one serial and max in all,
// each for ttl from its proof.
//
// A claim whose proven EK hashes are those of a claim the serial already
// holds comes from the same TPM: it replaces that claim, which then counts
// as the newest. A claim from another TPM is added beside the others. When
// a claim must go to make room, it is chosen by one rule, applied to the
// serial's own claims when the serial holds perSerial of them, and to the
// claims of the serials that hold the most (taken together) when the store
// holds max: of those m claims, oldest first, the first m/2 (rounded down)
// stay, and the oldest of the rest goes. See Config.MaxWaiting. The same
// rule bounds the claims proven from one source address to perPeer, over
// every serial they name (Config.MaxWaitingPerPeer).
type waitingStore struct {
	mu        sync.Mutex
	ttl       time.Duration
	max       int        // claims in all
	perSerial int        // claims of one serial
	perPeer   int        // claims proven from one address
	order     *list.List // of *waitingEntry, oldest first
	serials   map[string]*serialClaims
	peers     map[string]*serialClaims // by source address
	holding   []int                    // [k]: how many serials hold k claims (k > 0)
}

// serialClaims are one serial's (or one source address's) claims, oldest
// first.
type serialClaims struct{ claims []*list.Element }

type waitingEntry struct {
	claim   Claim
	expires time.Time
	of      *serialClaims // its serial's
	from    *serialClaims // its source address's
}

// peerKey is the source address of a claim's proof, without its port.
func peerKey(c Claim) string {
	if ap, err := netip.ParseAddrPort(c.Peer); err == nil {
		return ap.Addr().Unmap().String()
	}
	return c.Peer
}

// sameTPM reports whether a and b come from one TPM: the same proven EK
// hashes. Possession of each was proven, so only the TPM that holds those
// EKs can present them.
func sameTPM(a, b Claim) bool { return a.RSA2048 == b.RSA2048 && a.ECCP256 == b.ECCP256 }

func newWaitingStore(ttl time.Duration, max, perSerial, perPeer int) *waitingStore {
	perSerial = min(perSerial, max)
	return &waitingStore{ttl: ttl, max: max, perSerial: perSerial, perPeer: perPeer, order: list.New(),
		serials: map[string]*serialClaims{}, peers: map[string]*serialClaims{}, holding: make([]int, perSerial+1)}
}

// put keeps c, proven at now, making room as the store's doc says.
func (w *waitingStore) put(c Claim, now time.Time) {
	c = c.clone()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.prune(now)
	if own := w.serials[c.Serial]; own != nil {
		for _, e := range own.claims {
			if sameTPM(e.Value.(*waitingEntry).claim, c) {
				w.remove(e)
				break
			}
		}
	}
	if own := w.serials[c.Serial]; own != nil && len(own.claims) >= w.perSerial {
		w.remove(own.claims[len(own.claims)/2])
	}
	peer := peerKey(c)
	if from := w.peers[peer]; from != nil && len(from.claims) >= w.perPeer {
		w.remove(from.claims[len(from.claims)/2])
	}
	if w.order.Len() >= w.max {
		w.remove(w.victim())
	}
	own := w.serials[c.Serial]
	if own == nil {
		own = &serialClaims{}
		w.serials[c.Serial] = own
	}
	from := w.peers[peer]
	if from == nil {
		from = &serialClaims{}
		w.peers[peer] = from
	}
	e := w.order.PushBack(&waitingEntry{claim: c, expires: c.Proven.Add(w.ttl), of: own, from: from})
	own.claims = append(own.claims, e)
	from.claims = append(from.claims, e)
	w.hold(len(own.claims)-1, len(own.claims))
}

// hold records that a serial went from holding was claims to is.
func (w *waitingStore) hold(was, is int) {
	if was > 0 {
		w.holding[was]--
	}
	if is > 0 {
		w.holding[is]++
	}
}

// victim returns the claim that goes when the store is full: of the claims
// of the serials that hold the most, oldest first, the one after the first
// half (rounded down).
func (w *waitingStore) victim() *list.Element {
	most := len(w.holding) - 1
	for most > 0 && w.holding[most] == 0 {
		most--
	}
	skip := most * w.holding[most] / 2
	for e := w.order.Front(); e != nil; e = e.Next() {
		if len(e.Value.(*waitingEntry).of.claims) != most {
			continue
		}
		if skip == 0 {
			return e
		}
		skip--
	}
	panic("attest: the waiting claims lost count")
}

// remove forgets the claim e.
func (w *waitingStore) remove(e *list.Element) {
	we := e.Value.(*waitingEntry)
	w.order.Remove(e)
	own := we.of
	own.claims = slices.DeleteFunc(own.claims, func(o *list.Element) bool { return o == e })
	w.hold(len(own.claims)+1, len(own.claims))
	if len(own.claims) == 0 {
		delete(w.serials, we.claim.Serial)
	}
	from := we.from
	from.claims = slices.DeleteFunc(from.claims, func(o *list.Element) bool { return o == e })
	if len(from.claims) == 0 {
		delete(w.peers, peerKey(we.claim))
	}
}

// prune forgets the claims that expired by now. Claims expire nearly in
// the order they were put (each ttl after its proof); one that expired
// behind a later one is pruned with it, and never returned meanwhile.
func (w *waitingStore) prune(now time.Time) {
	for e := w.order.Front(); e != nil && !now.Before(e.Value.(*waitingEntry).expires); e = w.order.Front() {
		w.remove(e)
	}
}

// get returns the claims of serial that have not expired by now, oldest
// first, as copies; nil when none waits.
func (w *waitingStore) get(serial string, now time.Time) []Claim {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.prune(now)
	own := w.serials[serial]
	if own == nil {
		return nil
	}
	var out []Claim
	for _, e := range own.claims {
		we := e.Value.(*waitingEntry)
		if !now.Before(we.expires) {
			continue
		}
		out = append(out, we.claim.clone())
	}
	return out
}

// clone returns c with its own copies of the MAC and the switch port.
func (c Claim) clone() Claim {
	c.MAC = slices.Clone(c.MAC)
	if c.LLDP != nil {
		l := *c.LLDP
		c.LLDP = &l
	}
	return c
}

// WaitingClaim is a waiting claim (Server.Waiting) in the wire format of
// an approver API: the JSON object a composer's HTTP handler answers for
// each claim, and what its clients decode. The JSON field names are
// stable:
//
//	serial      the SMBIOS serial
//	mac         the MAC, lowercase and colon-separated
//	peer        the address the proof came from
//	proven      when the server accepted the proof (RFC 3339, UTC)
//	lldp        the switch port (LLDP's fields), or null
//	ek_rsa2048  the hash (EKHash) of the proven RSA-2048 EK, or ""
//	ek_eccp256  the hash of the proven ECC P-256 EK, or ""
//	text        the claim for an operator (Claim.String)
type WaitingClaim struct {
	Serial  string    `json:"serial"`
	MAC     string    `json:"mac"`
	Peer    string    `json:"peer"`
	Proven  time.Time `json:"proven"`
	LLDP    *LLDP     `json:"lldp"`
	RSA2048 string    `json:"ek_rsa2048"`
	ECCP256 string    `json:"ek_eccp256"`
	Text    string    `json:"text"`
}

// Wire returns c in the approver API's wire format, with its text.
func (c Claim) Wire() WaitingClaim {
	w := WaitingClaim{
		Serial: c.Serial, MAC: c.MAC.String(), Peer: c.Peer, Proven: c.Proven.UTC(),
		RSA2048: c.RSA2048, ECCP256: c.ECCP256,
	}
	if c.LLDP != nil {
		l := *c.LLDP
		w.LLDP = &l
	}
	w.Text = w.format()
	return w
}

// String returns the claim's text for an operator: Text, or when that is
// empty the text Claim.String gives for the claim's fields.
func (c WaitingClaim) String() string {
	if c.Text != "" {
		return c.Text
	}
	return c.format()
}

// String prints the claim for an operator, one fact a line: the serial,
// MAC, peer and time; the switch port; each proven EK hash. It approves
// nothing: a waiting claim proves nothing, because another machine can send
// one with this serial.
func (c Claim) String() string { return c.Wire().Text }

// format prints the claim as Claim.String does.
func (c WaitingClaim) format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "serial %s, MAC %s, from %s at %s\n", c.Serial, c.MAC, c.Peer, c.Proven.UTC().Format(time.RFC3339))
	if l := c.LLDP; l != nil {
		fmt.Fprintf(&b, "switch %q (chassis %s), port %q", l.SystemName, l.ChassisID, l.PortID)
		if l.PortDescription != "" {
			fmt.Fprintf(&b, " %q", l.PortDescription)
		}
		b.WriteString("\n")
	} else {
		b.WriteString("no LLDP frame from the switch\n")
	}
	if c.RSA2048 != "" {
		fmt.Fprintf(&b, "proven RSA-2048 EK %s\n", c.RSA2048)
	}
	if c.ECCP256 != "" {
		fmt.Fprintf(&b, "proven ECC P-256 EK %s\n", c.ECCP256)
	}
	return b.String()
}
