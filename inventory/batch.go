package inventory

import (
	"context"
	"sync"
)

// batcher makes concurrent calls of one kind share requests, as a database
// commits a group: a call that finds no batch in flight is sent at once,
// alone, so a lone call costs what it would unbatched and waits for
// nothing; calls that come while a batch is in flight wait for it to end,
// and then go together, at most max to a batch. A storm of calls thus
// costs a few requests, however many the calls.
//
// send gets the inputs of one batch and returns one output and one error
// per input, in their order. It runs with a context that carries the first
// caller's values but no caller's cancellation (each request is bounded by
// NetBoxConfig.Timeout): one caller giving up does not fail the others. A
// caller whose context ends while it waits gets the context's error; its
// input may still be sent.
//
// A batcher is safe for concurrent use. It holds a goroutine only while
// calls wait or are sent.
type batcher[In, Out any] struct {
	max  int
	send func(ctx context.Context, in []In) ([]Out, []error)

	mu      sync.Mutex // guards queue and running
	queue   []*batchCall[In, Out]
	running bool
}

type batchCall[In, Out any] struct {
	ctx  context.Context
	in   In
	out  Out
	err  error
	done chan struct{}
}

func newBatcher[In, Out any](max int, send func(context.Context, []In) ([]Out, []error)) *batcher[In, Out] {
	return &batcher[In, Out]{max: max, send: send}
}

// do sends in with the next batch and returns its output.
func (b *batcher[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &batchCall[In, Out]{ctx: ctx, in: in, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	}
}

// run sends batches until no call waits.
func (b *batcher[In, Out]) run() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.max)
		if n == 0 {
			b.queue, b.running = nil, false
			b.mu.Unlock()
			return
		}
		batch := make([]*batchCall[In, Out], 0, n)
		for _, c := range b.queue[:n] {
			if c.ctx.Err() != nil { // its caller is gone: send nothing for it
				c.err = c.ctx.Err()
				close(c.done)
				continue
			}
			batch = append(batch, c)
		}
		b.queue = b.queue[n:]
		b.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		in := make([]In, len(batch))
		for i, c := range batch {
			in[i] = c.in
		}
		outs, errs := b.send(context.WithoutCancel(batch[0].ctx), in)
		for i, c := range batch {
			c.out, c.err = outs[i], errs[i]
			close(c.done)
		}
	}
}

// each runs one for every input alone, and returns their outputs and
// errors: a batch that NetBox refused as a whole is sent again one by one,
// so that each caller gets its own answer.
func each[In, Out any](ctx context.Context, in []In, one func(context.Context, In) (Out, error)) ([]Out, []error) {
	outs, errs := make([]Out, len(in)), make([]error, len(in))
	for i, v := range in {
		outs[i], errs[i] = one(ctx, v)
	}
	return outs, errs
}

// all returns n copies of err.
func all(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}
