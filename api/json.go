package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"orderd/provider"
)

// writeJSON writes v as the JSON answer with status. HTML characters are
// not escaped, so URLs in provider data read as they came.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every answer is built from plain fields and valid raw JSON; if
		// that ever fails, say so rather than write half a body.
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":"encode answer"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// readBody reads the whole request body, bounded by the configured size.
// The body must be UTF-8, as JSON is: encoding/json would replace each bad
// byte with U+FFFD, so "g-\xff" and "g-\xfe" would become one
// merchantOrderId and one idempotency key.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		// Refused whatever it holds: answer now rather than wait for a
		// body that may never come, and close the connection instead of
		// reading the rest.
		w.Header().Set("Connection", "close")
		return nil, &tooLargeError{limit: s.cfg.MaxBodyBytes}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &tooLargeError{limit: mbe.Limit}
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			// The connection's read deadline has passed: nothing more
			// can be read from it, so it closes after the answer.
			w.Header().Set("Connection", "close")
			return nil, &slowBodyError{err: err}
		}
		return nil, &badRequestError{msg: "read body: " + err.Error()}
	}
	if !utf8.Valid(body) {
		return nil, &badRequestError{msg: fmt.Sprintf("body is not valid UTF-8 (byte %d)", invalidUTF8At(body))}
	}
	return body, nil
}

// invalidUTF8At is the offset of the first byte of b that is not part of
// valid UTF-8, or -1.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// decodeStrict decodes body, which must be exactly one JSON object, into
// dst. An unknown field, a key given twice or in another case than dst's
// field, and malformed JSON are a *badRequestError naming the key; a value
// of the wrong type is a validation error naming the field (the JSON is
// fine, the field is not).
func decodeStrict(body []byte, dst any) error {
	if err := checkKeys(body, keySchema(reflect.TypeOf(dst))); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &badRequestError{msg: "body must hold exactly one JSON object"}
	}
	return nil
}

// decodeObject decodes body, which must be exactly one JSON object, into a
// generic map keeping numbers exact (json.Number), for bodies whose shape
// the provider does not show. schema names the keys the caller reads; like
// every other key, they must be given once and in one case.
func decodeObject(body []byte, schema *provider.KeySchema) (map[string]any, error) {
	if err := checkKeys(body, schema); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &badRequestError{msg: "body must hold exactly one JSON object"}
	}
	return m, nil
}

// checkKeys checks that body is a JSON object and, when it is well formed
// (the decoder says what is wrong otherwise), that none of its keys at any
// depth is given twice or in another case (provider.CheckKeys, the check
// the webhook path makes of orders). encoding/json would take the last of
// two keys and match them case-insensitively, so {"amount":"0.01",
// "AMOUNT":"0.50"} would create a refund of 0.50.
func checkKeys(body []byte, schema *provider.KeySchema) error {
	if err := checkObject(body); err != nil {
		return err
	}
	if !json.Valid(body) {
		return nil
	}
	// encoding/json also turns an escaped lone surrogate ("\ud800") into
	// U+FFFD, so that "g-\ud800" and "g-\udbff" would be one merchantOrderId
	// too; the strict decoder (the provider's fast path) refuses it.
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true))
	if _, err := dec.ReadValue(); err != nil {
		return &badRequestError{msg: "body is not valid UTF-8 once unescaped: " + strings.TrimPrefix(err.Error(), "jsontext: ")}
	}
	if err := provider.CheckKeys(body, schema); err != nil {
		var ke *provider.KeyError
		if errors.As(err, &ke) {
			return &badRequestError{msg: ke.Error(), field: ke.Field}
		}
		return &badRequestError{msg: err.Error()}
	}
	return nil
}

// keySchema is the keys of the JSON object a struct type (or a pointer to
// one) decodes from: its fields' JSON names, with the keys of the fields
// that hold objects. The request bodies have no embedded structs.
func keySchema(t reflect.Type) *provider.KeySchema {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	s := &provider.KeySchema{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s.Keys = append(s.Keys, name)
		if sub := keySchema(f.Type); sub != nil {
			if s.Objects == nil {
				s.Objects = map[string]*provider.KeySchema{}
			}
			s.Objects[name] = sub
		}
	}
	return s
}

func checkObject(body []byte) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return &badRequestError{msg: "body is empty; a JSON object is required"}
	case trimmed[0] != '{':
		return &badRequestError{msg: "body must be a JSON object"}
	}
	return nil
}

func decodeError(err error) error {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &se):
		return &badRequestError{msg: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)}
	case errors.As(err, &te) && te.Field != "":
		return fieldErrors{{Field: te.Field, Message: "must be " + jsonKind(te.Type.String())}}
	case errors.As(err, &te):
		return &badRequestError{msg: "body must be a JSON object"}
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return &badRequestError{msg: "malformed JSON: unexpected end of body"}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if f, uerr := strconv.Unquote(name); uerr == nil {
			name = f
		}
		return &badRequestError{msg: fmt.Sprintf("unknown field %q", name), field: name}
	}
	return &badRequestError{msg: "malformed JSON: " + err.Error()}
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	default:
		return "an object"
	}
}

// canonicalJSON re-encodes v so that equal requests have equal bytes
// whatever their formatting: struct fields in declaration order, map keys
// sorted, no insignificant space, numbers as written.
func canonicalJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
