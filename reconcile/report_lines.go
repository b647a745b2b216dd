package reconcile

import (
	"context"

	"orderd/store"
)

// A report's lines are read in two goroutines: one reads the orders'
// rows from SQLite, the other decodes each stored state, computes the
// line and writes it. Each costs about as much as the other over a month
// of orders, so on two cores a report takes about as long as reading its
// rows. The rows pass between them in batches (owned copies, recycled
// through a fixed set, so memory stays flat); the lines come in the
// store's row order, as from one loop.

// lineBatch is how many orders pass at once; batches is how many exist.
const (
	lineBatch = 256
	batches   = 4
)

// orderBatch holds copies of up to lineBatch orders; an order's Raw and
// Requested are cut from bytes when it is read back (see at).
type orderBatch struct {
	orders []store.ReportOrder
	// ends[2i] and ends[2i+1] are where order i's raw and requested end
	// in bytes; hasReq says whether it had a requested body at all.
	ends   []int
	hasReq []bool
	bytes  []byte
}

func (b *orderBatch) reset() {
	b.orders, b.ends, b.hasReq, b.bytes = b.orders[:0], b.ends[:0], b.hasReq[:0], b.bytes[:0]
}

// add copies o, which is valid only during the store's callback.
func (b *orderBatch) add(o *store.ReportOrder) {
	c := *o
	c.Raw, c.Requested = nil, nil
	if len(o.OpenFindings) > 0 {
		c.OpenFindings = append([]string(nil), o.OpenFindings...)
	} else {
		c.OpenFindings = nil
	}
	b.orders = append(b.orders, c)
	b.bytes = append(b.bytes, o.Raw...)
	b.ends = append(b.ends, len(b.bytes))
	b.bytes = append(b.bytes, o.Requested...)
	b.ends = append(b.ends, len(b.bytes))
	b.hasReq = append(b.hasReq, o.Requested != nil)
}

// at returns order i with its Raw and Requested.
func (b *orderBatch) at(i int) *store.ReportOrder {
	o := &b.orders[i]
	start := 0
	if i > 0 {
		start = b.ends[2*i-1]
	}
	o.Raw = b.bytes[start:b.ends[2*i]:b.ends[2*i]]
	o.Requested = nil
	if b.hasReq[i] {
		o.Requested = b.bytes[b.ends[2*i]:b.ends[2*i+1]:b.ends[2*i+1]]
	}
	return o
}

// lines calls fn with every line of the period, in the store's row order.
// The Line is reused between calls. fn runs in the caller's goroutine.
func (rp *report) lines(ctx context.Context, fn func(*Line) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	free := make(chan *orderBatch, batches)
	for range batches {
		free <- &orderBatch{}
	}
	full := make(chan *orderBatch, batches)
	readErr := make(chan error, 1)
	go func() {
		defer close(full)
		var b *orderBatch
		send := func() error {
			select {
			case full <- b:
				b = nil
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := rp.tx.Orders(ctx, rp.p.From, rp.p.To, rp.p.From.Add(-refundSkew), func(o *store.ReportOrder) error {
			if b == nil {
				select {
				case b = <-free:
					b.reset()
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			b.add(o)
			if len(b.orders) == lineBatch {
				return send()
			}
			return nil
		})
		if err == nil && b != nil {
			err = send()
		}
		readErr <- err
	}()
	var (
		l    Line
		dec  orderAmounts
		fast amountsDecoder
		err  error
	)
	for b := range full {
		for i := 0; i < len(b.orders) && err == nil; i++ {
			o := b.at(i)
			if o.HasAmounts {
				dec.fromColumns(o.Type, &o.Amounts)
			} else if derr := dec.decodeWith(&fast, o.Raw); derr != nil {
				if o.AmountsErr != nil {
					derr = o.AmountsErr
				}
				// The write path stored it, so it decoded once; a report
				// shows the order with what the columns say rather than
				// fail.
				rp.r.log.Warn("report: order state does not decode", "order", o.ProviderID, "err", derr)
				dec = orderAmounts{}
			}
			if rp.fill(&l, o, &dec) {
				if err = fn(&l); err != nil {
					// Stop the reader; the loop drains what it sent.
					cancel()
				}
			}
		}
		free <- b
	}
	if rerr := <-readErr; err == nil {
		err = rerr
	}
	return err
}
