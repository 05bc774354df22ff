package attest_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/testcert"
	goattest "github.com/google/go-attestation/attest"
	legacy "github.com/google/go-tpm/legacy/tpm2"
	"github.com/google/go-tpm/legacy/tpm2/credactivation"
	"github.com/google/go-tpm/tpm2"
)

// cryptoFloor is what no server can skip: go-attestation's check of the
// AK's parameters, once, and one credential-activation challenge per EK
// (go-tpm's credactivation, as ActivationParameters.Generate makes it),
// with its random secret.
func cryptoFloor(b testing.TB, ak attest.AKParameters, eks []attest.EK) {
	p := goattest.ActivationParameters{AK: goattest.AttestationParameters{
		Public: ak.Public, CreateData: ak.CreateData, CreateAttestation: ak.CreateAttestation, CreateSignature: ak.CreateSignature,
	}}
	if err := p.CheckAKParameters(); err != nil {
		b.Fatal(err)
	}
	att, err := legacy.DecodeAttestationData(ak.CreateAttestation)
	if err != nil {
		b.Fatal(err)
	}
	for _, ek := range eks {
		secret := make([]byte, 32)
		rand.Read(secret)
		if _, _, err := credactivation.Generate(att.AttestedCreationInfo.Name.Digest, ek.Public, 16, secret); err != nil {
			b.Fatal(err)
		}
	}
}

// quoteFloor is what no server can skip of a quote: go-attestation's
// parse of the AK, the check of the quote's signature, its decoding, its
// nonce and its PCR digest over every quoted bank, the event log's parse
// and its replay to each bank (go-attestation), and the Secure Boot
// state.
func quoteFloor(b testing.TB, ak attest.AKParameters, q attest.Quote, nonce, log []byte) {
	pub, err := goattest.ParseAKPublic(ak.Public)
	if err != nil {
		b.Fatal(err)
	}
	sig, err := tpm2.Unmarshal[tpm2.TPMTSignature](q.Signature)
	if err != nil {
		b.Fatal(err)
	}
	ecc, err := sig.Signature.ECDSA()
	if err != nil {
		b.Fatal(err)
	}
	digest := sha256.Sum256(q.Quote)
	r, s := new(big.Int).SetBytes(ecc.SignatureR.Buffer), new(big.Int).SetBytes(ecc.SignatureS.Buffer)
	if !ecdsa.Verify(pub.Public.(*ecdsa.PublicKey), digest[:], r, s) {
		b.Fatal("the quote's signature does not verify")
	}
	att, err := tpm2.Unmarshal[tpm2.TPMSAttest](q.Quote)
	if err != nil {
		b.Fatal(err)
	}
	info, err := att.Attested.Quote()
	if err != nil || !bytes.Equal(att.ExtraData.Buffer, nonce) {
		b.Fatalf("quote %+v, %v", att, err)
	}
	h := sha256.New()
	for _, bk := range q.Banks {
		for _, d := range bk.PCRs {
			h.Write(d)
		}
	}
	if !bytes.Equal(h.Sum(nil), info.PCRDigest.Buffer) {
		b.Fatal("the PCRs do not hash to the quote's digest")
	}
	el, err := goattest.ParseEventLog(log)
	if err != nil {
		b.Fatal(err)
	}
	var events []goattest.Event
	for _, bk := range q.Banks {
		pcrs := make([]goattest.PCR, len(bk.PCRs))
		for i, d := range bk.PCRs {
			pcrs[i] = goattest.PCR{Index: i, Digest: d, DigestAlg: bk.Hash}
		}
		ev, err := el.Verify(pcrs)
		if err != nil {
			b.Fatal(err)
		}
		if bk.Hash == crypto.SHA256 {
			events = ev
		}
	}
	if sb, err := goattest.ParseSecurebootState(events); err != nil || !sb.Enabled {
		b.Fatalf("Secure Boot state %+v, %v", sb, err)
	}
}

// approvedServer is a Server that approves quickTPM(tb, 0) as S1 and
// admits it with an install code, its audit lines discarded, with that
// TPM and its claim.
func approvedServer(tb testing.TB) (*attest.Server, *attesttest.SoftTPM, []byte) {
	bindings := &attesttest.Bindings{}
	srv, err := attest.NewServer(bindings, &attest.Config{
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Admit: func(context.Context, attest.Claim) (attest.Admission, error) {
			return attest.Admission{InstallCode: "c0de"}, nil
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tpm := quickTPM(tb, 0)
	bindings.Set("S1", attesttest.Approved(tb, tpm))
	return srv, tpm, mustJSON(tb, claimOf(tb, tpm, "S1"))
}

// BenchmarkServerAttestation measures the server's CPU per attestation: its
// handler answering the claim and the proof, both EKs, audit line
// included (ns/op). The clients' TPM work happens between the two phases,
// off the clock, so that the server runs as warm as the crypto floor does;
// the floor, on the same inputs, is measured batch by batch beside them,
// and ratio is the quotient.
func BenchmarkServerAttestation(b *testing.B) { benchAttestation(b, nil) }

// BenchmarkServerAttestationQuote is BenchmarkServerAttestation with a
// quote of PCRs 0-7 of the four PCR banks and the event log of a boot
// with Secure Boot on (every event with a digest per bank) in each proof;
// its floor adds the quote's verification, the log's replay to each bank
// and the Secure Boot state to the crypto floor.
func BenchmarkServerAttestationQuote(b *testing.B) {
	on := newBootKeys(b).log(b, true)
	benchAttestation(b, on)
}

// BenchmarkServerAttestationQuote48KiB is BenchmarkServerAttestationQuote
// with the log grown to about 48 KiB, a firmware's usual size: 44 more
// EV_EFI_ACTION events of 1 KiB each in PCR 4.
func BenchmarkServerAttestationQuote48KiB(b *testing.B) {
	on := newBootKeys(b).log(b, true)
	for i := range 44 {
		on.Add(4, 0x80000007, []byte(fmt.Sprintf("%-1024d", i)))
	}
	benchAttestation(b, on)
}

// benchAttestation measures the server per attestation and its floor;
// with boot, the TPM measured it and each proof carries a quote and its
// log.
func benchAttestation(b *testing.B, boot *attesttest.BootLog) {
	srv, tpm, claim := approvedServer(b)
	ak, _ := tpm.AK()
	eks, _ := tpm.EKs()
	if boot != nil {
		tpm.Measure(boot)
	}
	var quotes []attest.Quote // the batch's quotes, for the floor
	serve := func(op string, bodies [][]byte) ([][]byte, time.Duration) {
		reqs := make([]*http.Request, len(bodies))
		for i, body := range bodies {
			reqs[i] = httptest.NewRequest(http.MethodPost, "/attest/"+op, bytes.NewReader(body))
		}
		out := make([][]byte, len(bodies))
		codes := make([]int, len(bodies))
		b.StartTimer()
		start := time.Now()
		for i, req := range reqs {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			out[i], codes[i] = rec.Body.Bytes(), rec.Code
		}
		d := time.Since(start)
		b.StopTimer()
		for i, code := range codes {
			if code != http.StatusOK {
				b.Fatalf("%s: %d %s", op, code, out[i])
			}
		}
		return out, d
	}
	// Batches keep the live heap as small as a server's while the clock
	// runs over many attestations in a row.
	const batch = 100
	b.ResetTimer()
	b.StopTimer()
	var server, floor time.Duration
	for done := 0; done < b.N; {
		n := min(batch, b.N-done)
		claims := make([][]byte, n)
		for i := range claims {
			claims[i] = claim
		}
		challenges, claimTime := serve("claim", claims)
		proofs := make([][]byte, n)
		sessions := make([][]byte, n)
		for i, c := range challenges {
			var ch wireChallenge
			if err := json.Unmarshal(c, &ch); err != nil {
				b.Fatal(err)
			}
			sessions[i] = ch.Session
			p := activate(b, tpm, ch)
			if boot != nil {
				q, err := tpm.Quote(attest.QuoteNonce(ch.Session))
				if err != nil {
					b.Fatal(err)
				}
				p.Quote = wireQuoteOf(q, boot.Bytes())
				quotes = append(quotes, q)
			}
			proofs[i] = proofBody(b, p)
		}
		results, proofTime := serve("proof", proofs)
		for _, r := range results {
			var res wireResult
			if err := json.Unmarshal(r, &res); err != nil || res.Verdict != "attested" {
				b.Fatalf("answer %s", r)
			}
		}
		server += claimTime + proofTime
		// The floor, on the same inputs and within the same moment, so
		// that the machine's other load weighs on both alike.
		start := time.Now()
		for i := 0; i < n; i++ {
			cryptoFloor(b, ak, eks)
			if boot != nil {
				quoteFloor(b, ak, quotes[i], attest.QuoteNonce(sessions[i]), boot.Bytes())
			}
		}
		floor += time.Since(start)
		quotes = quotes[:0]
		done += n
	}
	// ns/op is the server's time alone: the clock ran only around it.
	b.ReportMetric(float64(floor.Nanoseconds())/float64(b.N), "floor-ns/attestation")
	b.ReportMetric(float64(server)/float64(floor), "ratio")
}

// BenchmarkCryptoFloor is the crypto floor alone: the AK check and one
// challenge per EK.
func BenchmarkCryptoFloor(b *testing.B) {
	tpm := quickTPM(b, 0)
	ak, _ := tpm.AK()
	eks, _ := tpm.EKs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cryptoFloor(b, ak, eks)
	}
}

// A storm machine and the verdict it must get.
type stormMachine struct {
	serial string
	tpm    attest.TPM
	want   attest.Verdict
}

var (
	stormMu  sync.Mutex
	stormSet []stormMachine
)

// stormMachines returns n machines (made once per test binary): every 20,
// one unknown serial (pending-approval), one swapped TPM (ek-hash-mismatch),
// one unauthored binding, one TPM without its approved ECC EK (ek-missing);
// the rest attested. RSA EKs come from a pool of 8 keys (generating 1,000
// takes over a minute here); every ECC EK and AK is the machine's own.
func stormMachines(tb testing.TB, bindings *attesttest.Bindings, n int) []stormMachine {
	tb.Helper()
	stormMu.Lock()
	defer stormMu.Unlock()
	for i := len(stormSet); i < n; i++ {
		serial := fmt.Sprintf("STORM-%04d", i)
		cfg := &attesttest.SoftConfig{RSAEK: rsaKey(tb, i%8)}
		want := attest.Attested
		switch i % 20 {
		case 0:
			want = attest.PendingApproval
		case 1:
			want = attest.EKHashMismatch
		case 2:
			want = attest.EKBindingUnauthored
		case 3:
			want = attest.EKMissing
			cfg.NoECC = true
		}
		stormSet = append(stormSet, stormMachine{serial: serial, tpm: attesttest.MakeSoftTPM(tb, cfg), want: want})
	}
	for i, m := range stormSet[:n] {
		var b attest.Binding
		switch i % 20 {
		case 0:
		case 1:
			b = attesttest.Approved(tb, stormSet[(i+1)%n].tpm) // another machine's TPM
		case 2:
			b = attesttest.Approved(tb, m.tpm)
			b.Authored = false
		case 3:
			b = attesttest.Approved(tb, m.tpm)
			b.ECCP256 = attesttest.Approved(tb, stormSet[(i+1)%n].tpm).ECCP256
		default:
			b = attesttest.Approved(tb, m.tpm)
		}
		if b != (attest.Binding{}) {
			bindings.Set(m.serial, b)
		}
	}
	return stormSet[:n]
}

// stormResult is one boot storm's outcome.
type stormResult struct {
	wall            time.Duration
	p50, p99, max   time.Duration // per machine, Run's start to its verdict
	fp50, fp99      time.Duration // per machine, the time spent waiting on fleetd
	bindingRequests int
}

// timingTransport adds up the time each machine's requests spend on the
// wire and in fleetd, leaving out the machine's own TPM work.
type timingTransport struct {
	rt   http.RoundTripper
	wait time.Duration
}

func (t *timingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	rsp, err := t.rt.RoundTrip(r)
	if err == nil {
		b, rerr := io.ReadAll(rsp.Body)
		rsp.Body.Close()
		rsp.Body = io.NopCloser(bytes.NewReader(b))
		err = rerr
	}
	t.wait += time.Since(start)
	return rsp, err
}

// stormPatience is how long a storm's machine waits for each answer, and
// how long the storm's server keeps a session for its proof: a storm
// checks every verdict, not how fast one comes, and on two loaded cores
// (load average 20-25) a machine among 1,000 started at once can wait
// longer than a machine's defaults (a request's 30 s, a session's 60 s).
const stormPatience = 10 * time.Minute

// bootStorm starts every machine at once against the storm's fleetd, each
// with its own HTTPS connection, and checks every verdict and install
// code, and one binding request per attestation. The storm's fleetd judges against the machines' bindings, keeps a
// session stormPatience, and answers each claim it admits (once) the
// install code "code-" and its serial; it serves a certificate for
// 127.0.0.1 with an ECDSA P-256 key, like the ACME certificate fleetd
// serves.
func bootStorm(tb testing.TB, n int) stormResult {
	tb.Helper()
	bindings := &attesttest.Bindings{}
	machines := stormMachines(tb, bindings, n)
	var admitted sync.Map
	srv, err := attest.NewServer(bindings, &attest.Config{
		Logger:     slog.New(slog.NewJSONHandler(io.Discard, nil)),
		SessionTTL: stormPatience,
		Admit: func(_ context.Context, c attest.Claim) (attest.Admission, error) {
			if _, dup := admitted.LoadOrStore(c.Serial, true); dup {
				return attest.Admission{}, fmt.Errorf("%s admitted twice", c.Serial)
			}
			return attest.Admission{InstallCode: "code-" + c.Serial}, nil
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := testcert.New("127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	// Goroutines carry the side they work for into a CPU profile (go tool
	// pprof -tagfocus side=fleetd): the server's connections inherit the
	// label of the goroutine that starts it.
	pprof.Do(context.Background(), pprof.Labels("side", "fleetd"), func(context.Context) { ts.StartTLS() })
	defer ts.Close()
	lat, wait := make([]time.Duration, n), make([]time.Duration, n)
	errs, results := make([]error, n), make([]attest.Result, n)
	start := make(chan struct{})
	var done sync.WaitGroup
	for i, m := range machines {
		done.Go(func() {
			pprof.Do(context.Background(), pprof.Labels("side", "machine"), func(context.Context) {
				tt := &timingTransport{rt: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}}}
				client := &http.Client{Transport: tt}
				<-start
				t0 := time.Now()
				results[i], errs[i] = attest.Run(context.Background(), ts.URL+"/attest", m.tpm,
					attest.Machine{Serial: m.serial, MAC: net.HardwareAddr{2, 0, 0, 0, byte(i >> 8), byte(i)}},
					&attest.ClientConfig{HTTPClient: client, Tries: 1, RequestTimeout: stormPatience})
				lat[i] = time.Since(t0)
				wait[i] = tt.wait
				tt.rt.(*http.Transport).CloseIdleConnections()
			})
		})
	}
	t0 := time.Now()
	close(start)
	done.Wait()
	wall := time.Since(t0)
	for i, m := range machines {
		if errs[i] != nil {
			tb.Fatalf("%s: %v", m.serial, errs[i])
		}
		if results[i].Verdict != m.want {
			tb.Fatalf("%s: verdict %s (%s), want %s", m.serial, results[i].Verdict, results[i].Reason, m.want)
		}
		if (m.want == attest.Attested) != (results[i].InstallCode == "code-"+m.serial) {
			tb.Fatalf("%s: install code %q", m.serial, results[i].InstallCode)
		}
	}
	if r := bindings.Calls(); r != n {
		tb.Fatalf("%d binding requests for %d attestations, want one each", r, n)
	}
	slices.Sort(lat)
	slices.Sort(wait)
	pct := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(float64(len(d))*p))] }
	return stormResult{
		wall: wall, p50: pct(lat, 0.50), p99: pct(lat, 0.99), max: lat[n-1],
		fp50: pct(wait, 0.50), fp99: pct(wait, 0.99), bindingRequests: bindings.Calls(),
	}
}

// BenchmarkBootStorm: 1,000 software-TPM machines attest at once over
// loopback HTTPS, each on its own connection. Every verdict is checked.
// The machines' TPM work runs on the same cores as the server.
func BenchmarkBootStorm(b *testing.B) {
	const n = 1000
	stormMachines(b, &attesttest.Bindings{}, n) // made before the clock runs
	b.ResetTimer()
	var r stormResult
	for i := 0; i < b.N; i++ {
		r = bootStorm(b, n)
	}
	b.ReportMetric(float64(n)/r.wall.Seconds(), "attestations/s")
	b.ReportMetric(float64(r.p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(r.p99.Milliseconds()), "p99-ms")
	b.ReportMetric(float64(r.fp50.Milliseconds()), "fleetd-p50-ms")
	b.ReportMetric(float64(r.fp99.Milliseconds()), "fleetd-p99-ms")
	b.ReportMetric(float64(r.bindingRequests)/n, "binding-requests/attestation")
}

// TestBootStorm is the storm scaled down for CI (-race, -short): every
// verdict right, one binding request per attestation (bootStorm's checks).
func TestBootStorm(t *testing.T) {
	n := 1000
	if testing.Short() || raceEnabled {
		n = 100
	}
	r := bootStorm(t, n)
	t.Logf("%d machines: %.0f attestations/s, p50 %v, p99 %v, max %v; waiting on fleetd p50 %v, p99 %v",
		n, float64(n)/r.wall.Seconds(), r.p50, r.p99, r.max, r.fp50, r.fp99)
}
