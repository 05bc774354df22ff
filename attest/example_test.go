package attest_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
)

// A machine attests to a server mounted under fleetd's prefix, and its
// console shows the verdict.
func Example() {
	// A software TPM stands in for the machine's TPM.
	tpm, err := attesttest.NewSoftTPM(nil)
	if err != nil {
		panic(err)
	}
	// The node's entry approves the TPM's two EKs, and its binding author
	// wrote them.
	bindings := &attesttest.Bindings{}
	binding, _ := attesttest.Approve(tpm)
	bindings.Set("FLK-0001", binding)

	srv, err := attest.NewServer(bindings, &attest.Config{
		Admit: func(ctx context.Context, c attest.Claim) (attest.Admission, error) {
			return attest.Admission{InstallCode: "an install code"}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/attest/", srv)
	fleetd := httptest.NewTLSServer(mux)
	defer fleetd.Close()

	res, err := attest.Run(context.Background(), fleetd.URL+"/attest", tpm,
		attest.Machine{Serial: "FLK-0001", MAC: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}},
		&attest.ClientConfig{HTTPClient: fleetd.Client(), Console: os.Stdout})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Verdict, res.InstallCode != "")
	// Output:
	// attest: PASSED
	// attested true
}

func ExampleJudge() {
	approved := attest.Binding{
		Found:    true,
		Authored: true,
		RSA2048:  "1b5bbe2e96054f7bc34ebe7ba9a4a9eac5611c6879285ceff6094fa556af485c",
	}
	swapped := attest.Proven{RSA2048: "a4d1c0bbf2a1e3c2a07e7d54e2fd42c1b1dbd5d0e1ba6e0c7c5a0c3e4d2f1b0a"}
	j := attest.Judge(approved, swapped)
	fmt.Println(j.Verdict)
	fmt.Println(j.Reason)
	fmt.Println(j.RefusedHash)
	fmt.Println(attest.Judge(attest.Binding{}, swapped).Verdict)
	// Output:
	// ek-hash-mismatch
	// the TPM's RSA-2048 EK is not the one the entry approves
	// a4d1c0bbf2a1e3c2a07e7d54e2fd42c1b1dbd5d0e1ba6e0c7c5a0c3e4d2f1b0a
	// pending-approval
}
