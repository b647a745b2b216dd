#!/usr/bin/env bash
# Installs orderd in the one layout that "make install" and the Debian
# package ("make deb") share:
#
#   $PREFIX/bin/orderd                         the binary
#   $UNITDIR/orderd.service                    the unit, its ExecStart= and
#                                              Documentation= pointing at
#                                              $PREFIX
#   /etc/orderd/config.example.yaml            every key with its default
#                                              (replaced on each install)
#   /etc/orderd/config.yaml                    a copy of the example, only
#                                              when there is none yet
#   /etc/orderd/credentials/                   root's, 0700: the secrets
#                                              the unit loads with
#                                              LoadCredential=
#   $PREFIX/share/doc/orderd/                  README, SECURITY,
#                                              ARCHITECTURE, RUNBOOK,
#                                              LICENSE, NOTICE and the
#                                              bundled modules' licences
#   $PREFIX/share/doc/orderd/docs/             the user guide's pages
#   $PREFIX/share/doc/orderd/examples/         the credentials drop-in,
#                                              the TLS proxy in front
#   $PREFIX/share/doc/orderd/monitoring/       alerting rules, dashboard
#
# Usage: packaging/install.sh BINARY
# Environment: GO (default go, to list the modules compiled in), DESTDIR (staging root, default none), PREFIX (default
# /usr/local), UNITDIR (default $PREFIX/lib/systemd/system for /usr and
# /usr/local, which systemd reads, else /etc/systemd/system), PACKAGE=1
# when staging the Debian package: then config.yaml is left to the
# package's postinst and systemd is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:?usage: packaging/install.sh BINARY}
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
PREFIX=${PREFIX%/}
case $PREFIX in
/usr | /usr/local) UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system} ;;
*) UNITDIR=${UNITDIR:-/etc/systemd/system} ;;
esac
PACKAGE=${PACKAGE:-}
docdir=$PREFIX/share/doc/orderd
d=$DESTDIR

[ -x "$bin" ] || { echo "install: $bin is not an executable (run make build)" >&2; exit 1; }
case $PREFIX in /*) ;; *) echo "install: PREFIX must be an absolute path, got $PREFIX" >&2; exit 2 ;; esac

install -D -m 0755 "$bin" "$d$PREFIX/bin/orderd"

# The unit names the package's paths (/usr/bin/orderd, /usr/share/doc);
# another PREFIX is written into the copy installed.
install -d -m 0755 "$d$UNITDIR"
sed -e "s|/usr/bin/orderd|$PREFIX/bin/orderd|g" \
	-e "s|/usr/share/doc/orderd|$docdir|g" systemd/orderd.service >"$d$UNITDIR/orderd.service"
chmod 0644 "$d$UNITDIR/orderd.service"
grep -q "^ExecStart=$PREFIX/bin/orderd run " "$d$UNITDIR/orderd.service" ||
	{ echo "install: the unit's ExecStart does not name $PREFIX/bin/orderd" >&2; exit 1; }

install -d -m 0755 "$d/etc/orderd"
install -d -m 0700 "$d/etc/orderd/credentials"
install -m 0644 config.example.yaml "$d/etc/orderd/config.example.yaml"

install -d -m 0755 "$d$docdir" "$d$docdir/docs" "$d$docdir/examples" "$d$docdir/monitoring"
for f in README.md SECURITY.md ARCHITECTURE.md RUNBOOK.md BENCHMARKS.md LICENSE NOTICE; do
	install -m 0644 "$f" "$d$docdir/$f"
done
for f in docs/*.md; do
	install -m 0644 "$f" "$d$docdir/$f"
done
GO=${GO:-go} packaging/third-party-licenses.sh "$d$docdir/third-party-licenses"
chmod 0644 "$d$docdir/third-party-licenses"
install -m 0644 systemd/credentials.conf "$d$docdir/examples/credentials.conf"
install -m 0644 examples/nginx-orderd.conf "$d$docdir/examples/nginx-orderd.conf"
for f in monitoring/*.yml monitoring/*.json; do
	[ -e "$f" ] && install -m 0644 "$f" "$d$docdir/monitoring/${f#monitoring/}"
done

[ -n "$PACKAGE" ] && exit 0

if [ ! -e "$d/etc/orderd/config.yaml" ]; then
	install -m 0644 config.example.yaml "$d/etc/orderd/config.yaml"
	echo "install: wrote $d/etc/orderd/config.yaml from the example: edit it"
fi
if [ "$UNITDIR" != /etc/systemd/system ] && [ -e "$d/etc/systemd/system/orderd.service" ]; then
	echo "install: warning: $d/etc/systemd/system/orderd.service (an older install) overrides $UNITDIR/orderd.service; remove it" >&2
fi
if [ -n "$DESTDIR" ]; then
	echo "install: staged under $DESTDIR"
	exit 0
fi
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload
	echo "install: systemctl daemon-reload done"
fi
cat <<NEXT
install: orderd is installed, not enabled or started. Next ($docdir/docs/install.md):
  1. the provider's public key in /etc/orderd/, the secrets in /etc/orderd/credentials/
  2. install -D -m 0644 $docdir/examples/credentials.conf /etc/systemd/system/orderd.service.d/credentials.conf
  3. edit /etc/orderd/config.yaml
  4. systemctl daemon-reload && systemctl enable --now orderd
  5. curl -fsS http://127.0.0.1:8081/readyz
NEXT
