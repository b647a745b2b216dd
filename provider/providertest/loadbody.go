package providertest

import (
	"fmt"
	"time"
)

// LoadWebhook is the body of a webhook for load tools: a completed payin
// in the provider's shape whose id and merchantOrderId ("<prefix>-<runID
// in hex>-<i>") are unique to (runID, i), with an amount that varies with
// i and a 2 % fee. now sets its completion time.
func LoadWebhook(prefix string, runID uint32, i int, now time.Time) []byte {
	id := fmt.Sprintf("%08x-0000-4000-8000-%012x", runID, i)
	cents := 1000 + i%99000
	amount := fmt.Sprintf("%d.%02d", cents/100, cents%100)
	fee := cents * 2 / 100
	net := fmt.Sprintf("%d.%02d", (cents-fee)/100, (cents-fee)%100)
	created := now.Add(-2 * time.Minute).Format(time.RFC3339)
	completed := now.Format(time.RFC3339)
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":"%s-%08x-%d","type":"payin","createdAt":%q,`+
		`"status":"completed","rejectReason":null,"merchantSourceWallet":null,`+
		`"merchantTargetWallet":{"amount":%q,"currency":"brl"},"transactions":[{"id":"%s-tx","type":"payin",`+
		`"status":"completed","authorized":{"amount":%q,"currency":"brl"},"merchantWallet":{"amount":%q,"currency":"brl"},`+
		`"counterpartyInfo":null,"paymentInfo":null,"createdAt":%q,"completedAt":%q,"rejectReason":null}]}`,
		id, prefix, runID, i, created, net, id, amount, net, created, completed)
}
