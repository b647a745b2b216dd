#!/usr/bin/env bash
# Writes the licence texts of everything the orderd binary is built from
# besides orderd itself: the Go standard library and each Go module
# compiled in (as CGO_ENABLED=0 builds it), with the module's LICENSE,
# COPYING and NOTICE files from the module cache. A static binary carries
# their code, so the package carries their notices.
#
# Usage: packaging/third-party-licenses.sh OUTFILE
# Environment: GO (default go).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: packaging/third-party-licenses.sh OUTFILE}
GO=${GO:-go}

mods=$(CGO_ENABLED=0 $GO list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}' ./cmd/orderd | sort -u)
[ -n "$mods" ] || { echo "third-party-licenses: go list found no modules" >&2; exit 1; }

tmp=$out.tmp
{
	echo "The Go modules compiled into /usr/bin/orderd besides orderd itself, and"
	echo "the Go standard library, each with its licence and notice files."
	echo
	echo "== Go standard library $($GO env GOVERSION)"
	echo
	cat "$($GO env GOROOT)/LICENSE"
	while read -r path version dir; do
		files=$(find "$dir" -maxdepth 1 -type f \( -iname 'licen[cs]e*' -o -iname 'copying*' -o -iname 'notice*' \) | sort)
		[ -n "$files" ] || { echo "third-party-licenses: $path $version has no licence file in $dir" >&2; exit 1; }
		for f in $files; do
			echo
			echo "== $path $version: $(basename "$f")"
			echo
			cat "$f"
		done
	done <<<"$mods"
} >"$tmp"
mv "$tmp" "$out"
