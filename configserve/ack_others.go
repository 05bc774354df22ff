//go:build !linux

package configserve

import "time"

// ackSupported is false: outside Linux the Server cannot read how much of
// an answer the peer acknowledged, and counts an answer as served once
// every byte of it was written to the socket before the write deadline.
const ackSupported = false

func checkTCP(socket) error { return nil }

func awaitAck(socket, time.Time) (ackResult, error) { return ackResult{}, errAckUnsupported }
