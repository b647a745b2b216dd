package monitoring_test

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// labelValues matches Grafana's label_values(query, label) and
// label_values(label) variable queries.
var labelValues = regexp.MustCompile(`^\s*label_values\((?:(.*),)?\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// promqlKeywords are the PromQL words that are not metric names:
// aggregation operators, set and comparison keywords, modifiers.
var promqlKeywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
	"quantile": true, "limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true,
	"ignoring": true, "group_left": true, "group_right": true, "bool": true,
	"offset": true, "atan2": true, "start": true, "end": true, "inf": true, "nan": true,
}

// metricNames returns the metric names a PromQL expression (or a Grafana
// query such as label_values(metric, label)) selects, sorted and unique.
// It strips string literals, label matchers ({…}), label lists after
// by/without/on/ignoring/group_left/group_right, range and subquery
// brackets, and Grafana's $variables; what remains are function names
// (followed by "("), keywords, numbers, durations and metric names.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	var b strings.Builder
	// Strings and brace or bracket contents become spaces.
	depthBrace, depthBracket := 0, 0
	var quote rune
	for _, r := range expr {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
			r = ' '
		case r == '"' || r == '\'' || r == '`':
			quote, r = r, ' '
		case r == '{':
			depthBrace++
			r = ' '
		case r == '}':
			depthBrace--
			r = ' '
		case r == '[':
			depthBracket++
			r = ' '
		case r == ']':
			depthBracket--
			r = ' '
		case depthBrace > 0 || depthBracket > 0:
			r = ' '
		case r == '#': // a comment runs to the end of its line
			quote = '\n'
			r = ' '
		}
		b.WriteRune(r)
	}
	toks := tokenize(b.String())
	var names []string
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t == "(" || t == ")" || t == ",":
			continue
		case t == "by" || t == "without" || t == "on" || t == "ignoring" ||
			t == "group_left" || t == "group_right":
			// Skip the label list that follows, if any.
			if i+1 < len(toks) && toks[i+1] == "(" {
				j := i + 2
				for j < len(toks) && toks[j] != ")" {
					j++
				}
				i = j
			}
			continue
		case !isIdent(t) || promqlKeywords[strings.ToLower(t)]:
			continue
		case i+1 < len(toks) && toks[i+1] == "(":
			continue // a function
		}
		names = append(names, t)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// tokenize splits s into identifiers (with Grafana's $var and ${var}
// dropped), numbers and single punctuation characters.
func tokenize(s string) []string {
	var toks []string
	rs := []rune(s)
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '$':
			j := i + 1
			if j < len(rs) && rs[j] == '{' {
				for j < len(rs) && rs[j] != '}' {
					j++
				}
				j++
			} else {
				for j < len(rs) && (rs[j] == '_' || unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j])) {
					j++
				}
			}
			i = j
		case r == '_' || r == ':' || unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.':
			j := i
			for j < len(rs) && (rs[j] == '_' || rs[j] == ':' || rs[j] == '.' || unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j])) {
				j++
			}
			toks = append(toks, string(rs[i:j]))
			i = j
		default:
			toks = append(toks, string(r))
			i++
		}
	}
	return toks
}

// isIdent reports whether t can be a metric name (not a number or a
// duration such as 5m).
func isIdent(t string) bool {
	if t == "" || unicode.IsDigit(rune(t[0])) || t[0] == '.' {
		return false
	}
	for _, r := range t {
		if !(r == '_' || r == ':' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}
