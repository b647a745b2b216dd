package providertest

import (
	"errors"
	"net/http"
	"strings"

	"orderd/provider"
)

// checkoutPrefix is where auth.redirectUrl points: a page where the
// customer pays or declines, so a demo can be clicked through.
const checkoutPrefix = "/checkout/"

// checkoutHTML is the payment page; the element ids let a browser test
// click through it.
const checkoutHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Checkout {{.MerchantOrderID}}</title></head>
<body>
<h1>Pay order {{.MerchantOrderID}}</h1>
<p id="amount">{{.Amount}}</p>
<p id="status">{{.Status}}</p>
{{if .Open}}<form method="post" action="{{.Path}}/pay"><button id="pay" type="submit">Pay</button></form>
<form method="post" action="{{.Path}}/decline"><button id="decline" type="submit">Decline</button></form>{{end}}
</body></html>
`

type checkoutView struct {
	MerchantOrderID string
	Amount          string
	Status          provider.Status
	Open            bool
	Path            string
}

// serveCheckout shows the payment page of an order (GET /checkout/{id}) and
// takes the customer's choice (POST /checkout/{id}/pay or /decline), then
// sends the customer to the order's returnUrl when it has one.
func (s *Server) serveCheckout(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, checkoutPrefix)
	id, action, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	ord, ok := s.byID[id]
	var view checkoutView
	var returnURL string
	if ok && ord.auth != nil {
		view = checkoutView{
			MerchantOrderID: ord.o.MerchantOrderID,
			Amount:          ord.amount.String(),
			Status:          ord.o.Status,
			Open:            ord.o.Status == provider.StatusProcessing,
			Path:            checkoutPrefix + id,
		}
		returnURL = ord.returnURL
	}
	s.mu.Unlock()
	if view.Path == "" {
		http.NotFound(w, r)
		return
	}

	switch {
	case action == "" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = s.checkoutPage.Execute(w, view)
	case (action == "pay" || action == "decline") && r.Method == http.MethodPost:
		var err error
		if action == "pay" {
			err = s.Complete(view.MerchantOrderID)
		} else {
			err = s.Reject(view.MerchantOrderID, "declined by the customer")
		}
		if err != nil && !errors.Is(err, ErrConflict) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		target := view.Path
		if returnURL != "" {
			target = returnURL
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}
