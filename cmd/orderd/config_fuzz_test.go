package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// configKeys lists every key path of Config ("receiver.listen",
// "reconcile.schedules.stale", ...), the way the decoder names them.
func configKeys() []string {
	var keys []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || tag == "" || tag == "-" {
				continue
			}
			key := join(path, tag)
			if f.Type.Kind() == reflect.Struct && f.Type != prefixType && f.Type != decimalType {
				walk(f.Type, key)
				continue
			}
			keys = append(keys, key)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return keys
}

// yamlWith is a valid configuration (the three provider keys without
// defaults) with key set to the raw YAML value.
func yamlWith(key, value string) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	required := map[string]string{
		"base_url":    "https://api.provider.example",
		"api_key":     "inline-key",
		"public_keys": "[/etc/orderd/provider.pem]",
	}
	if parts[0] != "provider" {
		b.WriteString("provider:\n")
		for _, k := range []string{"base_url", "api_key", "public_keys"} {
			b.WriteString("  " + k + ": " + required[k] + "\n")
		}
	}
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i < len(parts)-1 {
			b.WriteString("\n")
			if i == 0 && p == "provider" {
				for _, k := range []string{"base_url", "api_key", "public_keys"} {
					if k != parts[1] {
						b.WriteString("  " + k + ": " + required[k] + "\n")
					}
				}
			}
		}
	}
	b.WriteString(" " + value + "\n")
	return b.String()
}

// configErrors returns every *configError in err, and whether err held
// anything else.
func configErrors(err error) (ces []*configError, other bool) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var ce *configError
		if errors.As(e, &ce) {
			ces = append(ces, ce)
		} else {
			other = true
		}
	}
	return ces, other
}

// within reports whether key is path or lies below it (an element of a
// list or a map).
func within(key, path string) bool {
	return key == path || strings.HasPrefix(key, path+".") || strings.HasPrefix(key, path+"[")
}

// FuzzConfig_KeyErrors sets one known key of an otherwise valid
// configuration to an arbitrary one-line YAML value. Parsing and
// validation must not panic; a parse error must name that key (or, for
// YAML that does not parse at all, be a syntax error), and every
// validation error must name a real key or section and say what is wrong —
// so an operator is always pointed at the line to fix.
func FuzzConfig_KeyErrors(f *testing.F) {
	keys := configKeys()
	values := []string{
		"", "~", "0", "-1", "-1s", "1e400", "NaN", "abc", "[1, 2]", "{a: 1}", "[[[]]]", `"quoted"`,
		"1MiB", "18446744073709551616", "@every 1m", "off", "127.0.0.1:0", ":80", "http://x",
		"10.0.0.0/8", "[10.0.0.1, '::1']", "{usd: 0.01, EUR: '1'}", "!!binary aGk=", "&a 1", "*b",
		"[", "'unterminated", "true", "-5m", "9999999h", "\x00", "\xff\xfe",
	}
	// Each key gets a share of the values and each value several keys,
	// which keeps the seed corpus (and the fuzzer's baseline) small.
	const perKey = 6
	for i := range keys {
		for j := range perKey {
			f.Add(uint16(i), values[(i*perKey+j)%len(values)])
		}
	}
	f.Fuzz(func(t *testing.T, k uint16, value string) {
		key := keys[int(k)%len(keys)]
		value = strings.NewReplacer("\n", " ", "\r", " ").Replace(value)
		doc := yamlWith(key, value)

		cfg, err := ParseConfig(strings.NewReader(doc))
		if err != nil {
			ces, other := configErrors(err)
			if other || len(ces) == 0 {
				t.Fatalf("parse error %v (%T) is not made of *configError", err, err)
			}
			for _, ce := range ces {
				switch {
				case ce.Key == "" && len(ces) == 1:
					// YAML that does not parse: a syntax error.
				case !within(ce.Key, key):
					t.Fatalf("setting %s gave an error about %q: %v\n%s", key, ce.Key, ce, doc)
				case !strings.Contains(ce.Error(), ce.Key) || ce.Problem == "":
					t.Fatalf("error %q does not name %s with a problem", ce, ce.Key)
				}
			}
			return
		}
		err = cfg.Validate()
		if err == nil {
			return
		}
		ces, other := configErrors(err)
		if other || len(ces) == 0 {
			t.Fatalf("validation error %v (%T) is not made of *configError", err, err)
		}
		for _, ce := range ces {
			known := false
			for _, p := range keys {
				// A leaf, inside a leaf's value, or a section.
				if within(ce.Key, p) || strings.HasPrefix(p, ce.Key+".") {
					known = true
					break
				}
			}
			if !known || ce.Problem == "" || !strings.Contains(ce.Error(), ce.Key) {
				t.Fatalf("setting %s: validation error %q does not name a known key with a problem\n%s", key, ce, doc)
			}
		}
	})
}

// TestConfigKeys: the key list the fuzz target draws from covers the
// example configuration's keys, so no key escapes it.
func TestConfigKeys(t *testing.T) {
	keys := configKeys()
	for _, want := range []string{"provider.base_url", "receiver.max_body_bytes", "admin.token_file",
		"nats.tls.ca_file", "nats.embedded.listen", "reconcile.schedules.stale", "reconcile.drift_tolerance",
		"log.format", "shutdown_timeout"} {
		found := false
		for _, k := range keys {
			found = found || k == want
		}
		if !found {
			t.Errorf("configKeys lacks %s (have %v)", want, keys)
		}
	}
	// The generated documents are valid around the key they set.
	cfg, err := ParseConfig(strings.NewReader(yamlWith("receiver.listen", "127.0.0.1:9999")))
	if err != nil || cfg.Validate() != nil || cfg.Receiver.Listen != "127.0.0.1:9999" {
		t.Errorf("receiver.listen document: %v, %+v", err, cfg)
	}
	cfg, err = ParseConfig(strings.NewReader(yamlWith("provider.timeout", "3s")))
	if err != nil || cfg.Validate() != nil || cfg.Provider.Timeout.String() != "3s" || cfg.Provider.BaseURL == "" {
		t.Errorf("provider.timeout document: %v, %+v", err, cfg)
	}
	for _, k := range keys {
		if _, err := ParseConfig(strings.NewReader(yamlWith(k, ""))); err != nil && !strings.Contains(err.Error(), k) {
			t.Errorf("%s with an empty value: %v", k, err)
		}
	}
}
