package api

import (
	"net/http"
	"strings"

	"orderd/provider"
	"orderd/store"
)

// watchBody is the body of POST /v1/watch. An order is named by
// merchantOrderId, type payin or payout, and state; a deposit requisite by
// type "requisite", requisiteId and optionally its currency.
type watchBody struct {
	MerchantOrderID string `json:"merchantOrderId,omitempty"`
	Type            string `json:"type"`
	State           string `json:"state,omitempty"`
	RequisiteID     string `json:"requisiteId,omitempty"`
	Currency        string `json:"currency,omitempty"`
}

// watchRequisite is the type of a requisite watch.
const watchRequisite = "requisite"

// watchState values.
const (
	watchCreated = "created"
	watchInDoubt = "in_doubt"
)

// watchingBody answers a watch of a created order or a requisite.
type watchingBody struct {
	State           string `json:"state"`
	Type            string `json:"type"`
	MerchantOrderID string `json:"merchantOrderId,omitempty"`
	RequisiteID     string `json:"requisiteId,omitempty"`
}

// handleWatch is POST /v1/watch: a platform that called the provider itself
// hands orderd an order to follow ("created") or a creation whose outcome
// it does not know ("in_doubt").
func (s *server) handleWatch(w http.ResponseWriter, r *http.Request) {
	var b watchBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	var v fieldErrors
	if v.required("type", b.Type) {
		v.oneOf("type", b.Type, string(provider.TypePayin), string(provider.TypePayout), watchRequisite)
	}
	if b.Type == watchRequisite {
		if v.required("requisiteId", b.RequisiteID) {
			v.uuid("requisiteId", b.RequisiteID)
		}
		v.optionalCurrency("currency", b.Currency)
		v.absent("merchantOrderId", b.MerchantOrderID, "is not used to watch a requisite")
		v.absent("state", b.State, "is not used to watch a requisite")
	} else {
		v.identifier("merchantOrderId", b.MerchantOrderID)
		if v.required("state", b.State) {
			v.oneOf("state", b.State, watchCreated, watchInDoubt)
		}
		v.absent("requisiteId", b.RequisiteID, "is used only with type requisite")
		v.absent("currency", b.Currency, "is used only with type requisite")
	}
	if err := v.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	if b.Type == watchRequisite {
		id := strings.ToLower(b.RequisiteID)
		err := s.deps.Store.UpsertRequisite(r.Context(), store.Requisite{ID: id, Currency: b.Currency,
			Source: store.RequisiteFromWatch})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.log.Info("watching requisite", "requisite", id)
		writeJSON(w, http.StatusAccepted, watchingBody{State: "watching", Type: b.Type, RequisiteID: id})
		return
	}
	if b.State == watchCreated {
		err := s.deps.Store.AddWatch(r.Context(), store.Watch{MerchantOrderID: b.MerchantOrderID,
			Type: provider.OrderType(b.Type), Reason: "created by the platform (watch)"})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.log.Info("watching order", "merchantOrderId", b.MerchantOrderID, "type", b.Type)
		writeJSON(w, http.StatusAccepted, watchingBody{State: "watching", MerchantOrderID: b.MerchantOrderID, Type: b.Type})
		return
	}
	req, err := canonicalJSON(b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	kind := store.AttemptKind(b.Type)
	// The watch refers to the order, not to a body: any live attempt for
	// the merchantOrderId (the gateway's own, or an earlier watch) is the
	// same creation.
	a, isNew, err := s.deps.Store.BeginAttempt(r.Context(), store.NewAttempt{
		Kind:            kind,
		Origin:          store.OriginWatch,
		MerchantOrderID: b.MerchantOrderID,
		IdempotencyKey:  orderKey(b.MerchantOrderID),
		Request:         req,
		RequestHash:     requestHash(kind, req),
		State:           store.AttemptInDoubt,
		Detail:          "handed over by the platform (watch)",
		AnyRequest:      true,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !isNew && a.Kind != kind {
		// The merchantOrderId's live attempt is of the other type: the
		// platform's order is not that creation, and answering with its
		// state would tell the platform its order exists.
		s.fail(w, r, &typeConflictError{existing: a, want: b.Type})
		return
	}
	if !isNew {
		writeJSON(w, http.StatusOK, outcomeBody(a))
		return
	}
	s.log.Info("watching in-doubt creation", "attempt", a.ID, "merchantOrderId", b.MerchantOrderID, "type", b.Type)
	writeJSON(w, http.StatusAccepted, outcomeBody(a))
}
