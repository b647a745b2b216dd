package providertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// stateVersion is the format of Options.StateFile; a file of another
// version is refused rather than half read.
const stateVersion = 1

// savedState is what Options.StateFile holds: the provider's books —
// orders with their transactions, requisites, balances and what pending
// debits reserve — and the counters that keep ids unique. Calls, webhook
// attempts, faults and timers are not kept.
type savedState struct {
	Version    int                        `json:"version"`
	Seq        int                        `json:"seq"`
	DepositSeq int                        `json:"depositSeq"`
	Balances   map[string]decimal.Decimal `json:"balances"`
	Reserved   map[string]decimal.Decimal `json:"reserved"`
	Orders     []savedOrder               `json:"orders"`
	Requisites []savedRequisite           `json:"requisites"`
}

type savedOrder struct {
	Order      provider.Order  `json:"order"`
	Seq        int             `json:"seq"`
	Amount     provider.Money  `json:"amount"`
	Net        decimal.Decimal `json:"net"`
	Auth       *provider.Auth  `json:"auth,omitempty"`
	WebhookURL string          `json:"webhookUrl,omitempty"`
	ReturnURL  string          `json:"returnUrl,omitempty"`
	Requisite  string          `json:"requisite,omitempty"` // its id
	Refunds    map[string]bool `json:"refunds,omitempty"`
}

type savedRequisite struct {
	Requisite  provider.Requisite `json:"requisite"`
	ClientID   string             `json:"clientId"`
	Currency   string             `json:"currency"`
	Kind       string             `json:"kind"`
	Prefix     string             `json:"prefix,omitempty"`
	WebhookURL string             `json:"webhookUrl,omitempty"`
	Active     bool               `json:"active"`
	Orders     []string           `json:"orders,omitempty"` // merchantOrderIds, in creation order
}

// loadState reads Options.StateFile into a server that has no orders yet.
// A file that does not exist is a fresh start: it reports false.
func (s *Server) loadState(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("options: StateFile: %w", err)
	}
	var st savedState
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return false, fmt.Errorf("options: StateFile %s: %w", path, err)
	}
	if st.Version != stateVersion {
		return false, fmt.Errorf("options: StateFile %s: version %d, want %d", path, st.Version, stateVersion)
	}
	s.seq, s.depositSeq = st.Seq, st.DepositSeq
	s.balances = map[string]decimal.Decimal{}
	for ccy, d := range st.Balances {
		s.balances[ccy] = d
	}
	for ccy, d := range st.Reserved {
		s.reserved[ccy] = d
	}
	for _, sr := range st.Requisites {
		r := &requisite{r: sr.Requisite, clientID: sr.ClientID, currency: sr.Currency, kind: sr.Kind,
			prefix: sr.Prefix, webhookURL: sr.WebhookURL, active: sr.Active}
		s.requisites[r.r.ID] = r
	}
	for _, so := range st.Orders {
		ord := &order{o: so.Order, seq: so.Seq, amount: so.Amount, net: so.Net, auth: so.Auth,
			webhookURL: so.WebhookURL, returnURL: so.ReturnURL, refunds: so.Refunds}
		if ord.refunds == nil {
			ord.refunds = map[string]bool{}
		}
		if so.Requisite != "" {
			r, ok := s.requisites[so.Requisite]
			if !ok {
				return false, fmt.Errorf("options: StateFile %s: order %s names requisite %s, which it does not hold",
					path, so.Order.MerchantOrderID, so.Requisite)
			}
			ord.requisite = r
		}
		if _, dup := s.orders[ord.o.MerchantOrderID]; dup {
			return false, fmt.Errorf("options: StateFile %s: order %s twice", path, ord.o.MerchantOrderID)
		}
		s.orders[ord.o.MerchantOrderID] = ord
		s.byID[ord.o.ID] = ord
	}
	for _, sr := range st.Requisites {
		r := s.requisites[sr.Requisite.ID]
		for _, moid := range sr.Orders {
			ord, ok := s.orders[moid]
			if !ok {
				return false, fmt.Errorf("options: StateFile %s: requisite %s lists order %s, which it does not hold",
					path, sr.Requisite.ID, moid)
			}
			r.orders = append(r.orders, ord)
		}
	}
	return true, nil
}

// snapshotLocked renders the state for the file.
func (s *Server) snapshotLocked() ([]byte, error) {
	st := savedState{Version: stateVersion, Seq: s.seq, DepositSeq: s.depositSeq,
		Balances: s.balances, Reserved: s.reserved}
	for _, ord := range s.orders {
		so := savedOrder{Order: ord.o, Seq: ord.seq, Amount: ord.amount, Net: ord.net, Auth: ord.auth,
			WebhookURL: ord.webhookURL, ReturnURL: ord.returnURL, Refunds: ord.refunds}
		if ord.requisite != nil {
			so.Requisite = ord.requisite.r.ID
		}
		st.Orders = append(st.Orders, so)
	}
	slices.SortFunc(st.Orders, func(a, b savedOrder) int { return a.Seq - b.Seq })
	for _, r := range s.requisites {
		sr := savedRequisite{Requisite: r.r, ClientID: r.clientID, Currency: r.currency, Kind: r.kind,
			Prefix: r.prefix, WebhookURL: r.webhookURL, Active: r.active}
		for _, ord := range r.orders {
			sr.Orders = append(sr.Orders, ord.o.MerchantOrderID)
		}
		st.Requisites = append(st.Requisites, sr)
	}
	slices.SortFunc(st.Requisites, func(a, b savedRequisite) int { return strings.Compare(a.Requisite.ID, b.Requisite.ID) })
	return json.Marshal(st)
}

// changedLocked notes that the books changed: with a StateFile, the saver
// writes them out soon after.
func (s *Server) changedLocked() {
	if s.opts.StateFile == "" {
		return
	}
	s.version++
	select {
	case s.saveReq <- struct{}{}:
	default: // a save is already due; it will see this change too
	}
}

// saver writes the state file whenever the books changed, until the
// server closes; Close writes it a last time.
func (s *Server) saver() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.saveReq:
		}
		if err := s.save(); err != nil {
			s.log.Error("save state", "file", s.opts.StateFile, "err", err)
		}
	}
}

// save writes the state file if it is behind, atomically: to a temporary
// file in the same directory, synced, then renamed over the old one, so a
// crash leaves the old file or the new one, never a torn one.
func (s *Server) save() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	if s.version == s.saved {
		s.mu.Unlock()
		return nil
	}
	v := s.version
	b, err := s.snapshotLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.opts.StateFile, b); err != nil {
		return err
	}
	s.mu.Lock()
	s.saved = v
	s.mu.Unlock()
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
