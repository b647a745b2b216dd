#!/usr/bin/env bash
# Builds the Debian package of orderd with dpkg-deb, as "make deb" does:
# a static binary (CGO_ENABLED=0, so the package depends on nothing), the
# layout of packaging/install.sh with PREFIX=/usr, and from packaging/deb/
# the control file, the maintainer scripts and the copyright file. Prints
# the .deb's path last.
#
# Environment: GO, VERSION and COMMIT (stamped into the binary, as
# "make build" does), DEB_VERSION (default: from VERSION, see below),
# DEB_ARCH (default: from GOARCH), OUT (directory, default dist).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || true)}
OUT=${OUT:-dist}

command -v dpkg-deb >/dev/null 2>&1 || { echo "build-deb: dpkg-deb not found (Debian's dpkg)" >&2; exit 1; }

# A Debian version starts with a digit: a tag v1.2.3 gives 1.2.3, a later
# commit 1.2.3+4.gabc1234; without a tag, 0.0~git<commit date>.<hash>.
if [ -z "${DEB_VERSION:-}" ]; then
	if printf '%s' "$VERSION" | grep -Eq '^v?[0-9]+\.[0-9]+'; then
		DEB_VERSION=$(printf '%s' "${VERSION#v}" | sed -e 's/-\([0-9]*\)-g/+\1.g/' -e 's/-dirty$/+dirty/' -e 's/-/~/g')
	else
		date=$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date -u +%Y%m%d)
		DEB_VERSION="0.0~git$date.$(printf '%s' "$VERSION" | sed -e 's/-dirty$/+dirty/' -e 's/[^A-Za-z0-9.+~]/./g')"
	fi
fi
if [ -z "${DEB_ARCH:-}" ]; then
	goarch=$($GO env GOARCH)
	case $goarch in
	amd64 | arm64 | s390x | riscv64 | loong64) DEB_ARCH=$goarch ;;
	386) DEB_ARCH=i386 ;;
	arm) DEB_ARCH=armhf ;;
	ppc64le) DEB_ARCH=ppc64el ;;
	*) echo "build-deb: no Debian architecture known for GOARCH=$goarch; set DEB_ARCH" >&2; exit 1 ;;
	esac
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root

CGO_ENABLED=0 $GO build -trimpath -ldflags "-X main.version=$VERSION -X main.commit=$COMMIT" \
	-o "$work/orderd" ./cmd/orderd
GO=$GO DESTDIR=$root PREFIX=/usr UNITDIR=/usr/lib/systemd/system PACKAGE=1 packaging/install.sh "$work/orderd"
# Debian's machine-readable copyright file (DEP-5), where Debian looks.
install -m 0644 packaging/deb/copyright "$root/usr/share/doc/orderd/copyright"

install -d -m 0755 "$root/DEBIAN"
for s in postinst prerm postrm; do
	install -m 0755 "packaging/deb/$s" "$root/DEBIAN/$s"
done
# The example config is a conffile: an operator who edits it is asked
# before an upgrade replaces it. config.yaml itself is not in the package
# (postinst writes it once), so upgrades never touch it.
printf '/etc/orderd/config.example.yaml\n' >"$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' |
	sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$DEB_VERSION/" -e "s/@ARCH@/$DEB_ARCH/" -e "s/@SIZE@/$size/" \
	packaging/deb/control.in >"$root/DEBIAN/control"

mkdir -p "$OUT"
deb=$OUT/orderd_${DEB_VERSION}_${DEB_ARCH}.deb
dpkg-deb --root-owner-group -Zgzip --build "$root" "$deb" >/dev/null
echo "build-deb: $(dpkg-deb -f "$deb" Package Version Architecture | tr '\n' ' ')"
echo "$deb"
