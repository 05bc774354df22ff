package inventory

import "strings"

// ApprovalLines formats the lines of a node's entry that approve its EKs,
// as `fleetctl approve <serial>` prints them for a waiting claim:
//
//	approved_ek_rsa2048: <hash>
//	approved_ek_eccp256: <hash>
//
// rsa2048 and eccp256 are the EK hashes the claim proved; a line is left
// out when its hash is "" (the TPM presented no EK of that type). Printing
// the lines approves nothing: an operator compares each hash with
// independent evidence before adding them to the entry.
func ApprovalLines(rsa2048, eccp256 string) string {
	var sb strings.Builder
	if rsa2048 != "" {
		sb.WriteString("approved_ek_rsa2048: " + rsa2048 + "\n")
	}
	if eccp256 != "" {
		sb.WriteString("approved_ek_eccp256: " + eccp256 + "\n")
	}
	return sb.String()
}
