package reconcile

import (
	"context"
	"fmt"
	"runtime/debug"

	"orderd/store"
)

// A report's lines are read in two goroutines: one reads the orders'
// rows from SQLite, the other parses each order's amounts (its amount
// columns, or for a row without them its stored state), computes the line
// and writes it. The reading costs the more over a month of orders, so
// on two cores a report takes about as long as reading its rows. The rows pass between them in batches (owned copies, recycled
// through a fixed set, so memory stays flat); the lines come in the
// store's row order, as from one loop.

// lineBatch is how many orders pass at once; batches is how many exist.
const (
	lineBatch = 256
	batches   = 4
)

// orderBatch holds copies of up to lineBatch orders; an order's byte
// fields (see fields) are cut from bytes when it is read back (see at).
type orderBatch struct {
	orders []store.ReportOrder
	// ends[3i+f] is where order i's field f ends in bytes; present[i]
	// has bit f set when the field was not nil.
	ends    []int
	present []uint8
	bytes   []byte
}

// fields are the byte fields of an order that are only valid during the
// store's callback: Raw, Requested and AmountColumns.
func fields(o *store.ReportOrder) [3]*[]byte {
	return [3]*[]byte{&o.Raw, &o.Requested, &o.AmountColumns}
}

func (b *orderBatch) reset() {
	b.orders, b.ends, b.present, b.bytes = b.orders[:0], b.ends[:0], b.present[:0], b.bytes[:0]
}

// add copies o, which is valid only during the store's callback.
func (b *orderBatch) add(o *store.ReportOrder) {
	c := *o
	if len(o.OpenFindings) > 0 {
		c.OpenFindings = append([]string(nil), o.OpenFindings...)
	} else {
		c.OpenFindings = nil
	}
	var present uint8
	for f, p := range fields(o) {
		if *p != nil {
			present |= 1 << f
		}
		b.bytes = append(b.bytes, *p...)
		b.ends = append(b.ends, len(b.bytes))
	}
	for _, p := range fields(&c) {
		*p = nil
	}
	b.orders = append(b.orders, c)
	b.present = append(b.present, present)
}

// at returns order i with its byte fields.
func (b *orderBatch) at(i int) *store.ReportOrder {
	o := &b.orders[i]
	start := 0
	if i > 0 {
		start = b.ends[3*i-1]
	}
	for f, p := range fields(o) {
		end := b.ends[3*i+f]
		*p = nil
		if b.present[i]&(1<<f) != 0 {
			*p = b.bytes[start:end:end]
		}
		start = end
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
		// A panic here would end the daemon, since no handler's recovery
		// reaches this goroutine: it fails this report instead, as one in
		// the writing goroutine fails only its request.
		defer func() {
			if v := recover(); v != nil {
				rp.r.log.Error("report: reading the orders panicked", "panic", v, "stack", string(debug.Stack()))
				readErr <- fmt.Errorf("report: reading the orders: panic: %v", v)
			}
		}()
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
		l       Line
		dec     orderAmounts
		fast    amountsDecoder
		cols    store.ReportAmountReader
		amounts store.ReportAmounts
		err     error
	)
	for b := range full {
		for i := 0; i < len(b.orders) && err == nil; i++ {
			o := b.at(i)
			var derr error
			if o.AmountColumns != nil {
				if derr = cols.Read(o.AmountColumns, &amounts); derr == nil {
					dec.fromColumns(o.Type, &amounts)
				}
			} else {
				derr = dec.decodeWith(&fast, o.Raw)
			}
			if derr != nil {
				// The write path stored them, so they read once (a
				// damaged row); a report shows the order with what its
				// other columns say rather than fail.
				rp.r.log.Warn("report: order amounts do not read", "order", o.ProviderID, "err", derr)
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
