package attest

// VerifyProofQuote is what the server decides of the quote of proof body
// (decodeProof, then verifyBoot) when the proof's session was sealed for
// the AK whose TPMT_PUBLIC is akPublic: for the tests of package
// attest_test, whose TPMs (package attesttest) quote. It returns the boot
// state, or the reason the proof is refused with and its cause; a body
// that does not decode returns its error and no reason.
func VerifyProofQuote(akPublic, body []byte) (boot *BootState, reason string, cause error) {
	p, err := decodeProof(body)
	if err != nil {
		return nil, "", err
	}
	boot, ref := verifyBoot(&session{akPublic: akPublic}, p)
	if ref != nil {
		return nil, ref.reason, ref.cause
	}
	return boot, "", nil
}
