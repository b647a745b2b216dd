package provider

// Code is a provider error code. The spec's list is partial, so a code not
// listed here is kept verbatim.
type Code string

// Error codes from the spec.
const (
	CodeInvalidData                 Code = "INVALID_DATA"
	CodeValidation                  Code = "VALIDATION"
	CodeMethodNotFound              Code = "METHOD_NOT_FOUND"
	CodeInvalidHTTPMethod           Code = "INVALID_HTTP_METHOD"
	CodeAuthenticationFailed        Code = "AUTHENTICATION_FAILED"
	CodeOrderAlreadyExists          Code = "ORDER_ALREADY_EXISTS"
	CodeOrderNotFound               Code = "ORDER_NOT_FOUND"
	CodeRejectedDueToTechnicalIssue Code = "REJECTED_DUE_TO_TECHNICAL_ISSUE"
	CodeRequestFromUntrustedSource  Code = "REQUEST_FROM_UNTRUSTED_SOURCE"
	CodePayinDisabled               Code = "PAYIN_DISABLED"
	CodePayoutDisabled              Code = "PAYOUT_DISABLED"
	CodeWalletNotFound              Code = "WALLET_NOT_FOUND"
	CodeWalletInactive              Code = "WALLET_INACTIVE"
	CodeRoutingNotConfigured        Code = "ROUTING_NOT_CONFIGURED"
	CodePointNotFound               Code = "POINT_NOT_FOUND"
	CodeAmountGreaterThanAllowed    Code = "AMOUNT_GREATER_THAN_ALLOWED"
	CodeAmountLessThanAllowed       Code = "AMOUNT_LESS_THAN_ALLOWED"
	CodeNotEnoughBalance            Code = "NOT_ENOUGH_BALANCE"
	CodeOperationNotSupported       Code = "OPERATION_NOT_SUPPORTED"
	CodeRefererDoesNotMatch         Code = "REFERER_REQUEST_DOES_NOT_MATCH_ALLOWED_SOURCES"
	CodeUnknown                     Code = "UNKNOWN"
)

// Codes lists every code the spec names, in the spec's order.
var Codes = []Code{
	CodeInvalidData, CodeValidation, CodeMethodNotFound, CodeInvalidHTTPMethod,
	CodeAuthenticationFailed, CodeOrderAlreadyExists, CodeOrderNotFound,
	CodeRejectedDueToTechnicalIssue, CodeRequestFromUntrustedSource, CodePayinDisabled,
	CodePayoutDisabled, CodeWalletNotFound, CodeWalletInactive, CodeRoutingNotConfigured,
	CodePointNotFound, CodeAmountGreaterThanAllowed, CodeAmountLessThanAllowed,
	CodeNotEnoughBalance, CodeOperationNotSupported, CodeRefererDoesNotMatch, CodeUnknown,
}

// Known reports whether c is one of the codes the spec names.
func (c Code) Known() bool {
	for _, k := range Codes {
		if k == c {
			return true
		}
	}
	return false
}
