#!/usr/bin/env bash
# Package: the desktop resources are valid as written and as rendered. The desktop entry passes
# desktop-file-validate, the AppStream metainfo passes appstreamcli validate, the MIME XML is
# well-formed, the icon PNGs have their nominal sizes and are not blank.
# Usage: test_resources.sh SOURCE_DIR RESOURCES_BUILD_DIR BITLENS_BINARY
set -uo pipefail
src=$1
out=$2
gui=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$src/tests/e2e/lib.sh"
res=$src/resources

if command -v desktop-file-validate > /dev/null; then
  check desktop-valid 0 desktop-file-validate "$res/org.bitlens.BitLens.desktop"
  expect desktop-no-error bash -c "! grep -qE 'error|warning' '$tmp/out' '$tmp/err'"
else
  skip "desktop-file-validate missing (desktop-file-utils; scripts/bootstrap installs it)"
fi
if command -v appstreamcli > /dev/null; then
  check metainfo-valid 0 appstreamcli validate --no-net "$res/org.bitlens.BitLens.metainfo.xml"
else
  skip "appstreamcli missing (appstream; scripts/bootstrap installs it)"
fi
expect mime-xml python3 -c "import xml.etree.ElementTree as E; E.parse('$res/bitlens-mime.xml')"
expect svg-xml python3 -c "import xml.etree.ElementTree as E; E.parse('$res/bitlens.svg')"
# The ids agree: desktop file name, metainfo id and launchable, and the app's desktop name.
expect metainfo-id grep -q "<id>org.bitlens.BitLens</id>" "$res/org.bitlens.BitLens.metainfo.xml"
expect metainfo-launchable grep -q ">org.bitlens.BitLens.desktop</launchable>" \
  "$res/org.bitlens.BitLens.metainfo.xml"
expect app-desktop-name grep -q 'setDesktopFileName(QStringLiteral("org.bitlens.BitLens"))' \
  "$src/app/gui/main.cpp"
for size in 16 32 48 64 128 256; do
  png=$out/icons/$size.png
  expect "icon-$size" bash -c "[ \"\$(identify -format '%wx%h' '$png')\" = '${size}x${size}' ]"
  # Drawn, with transparent corners: the tile's rounded corners are see-through.
  expect "icon-$size-drawn" bash -c "[ \$(identify -format '%k' '$png') -ge 8 ]"
  expect "icon-$size-corner" bash -c \
    "[ \"\$(convert '$png' -format '%[fx:p{0,0}.a]' info:)\" = 0 ]"
  expect "icon-$size-qrc" grep -q "icons/$size.png" "$res/bitlens.qrc"
done
# The icon is compiled into the GUI: rcc's name table holds each alias in UTF-16.
expect icons-in-binary python3 -c "
d = open('$gui', 'rb').read()
missing = [n for n in ['bitlens.svg'] + [f'{s}.png' for s in (16, 32, 48, 64, 128, 256)]
           if n.encode('utf-16-be') not in d]
assert not missing, missing"
finish
