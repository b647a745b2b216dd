package store

// SelectHeaders exposes selectHeaders to the external tests, which hold it
// to the json.Marshal encoding it replaced.
var SelectHeaders = selectHeaders
