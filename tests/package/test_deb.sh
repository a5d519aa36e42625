#!/usr/bin/env bash
# Package: the .deb of `make package` installs with apt into a clean Debian 12 root and runs
# there, away from the build tree, the venv and ~/.cache:
#   bitlens-cli --version, bitlens-cli quantize on a small ONNX model (exit code and report),
#   bitlens --screenshot offscreen (a non-trivial PNG), the desktop entry, icons, metainfo and
#   MIME types in place, the binaries' libraries all from /usr/lib/bitlens or Debian.
# The root (debootstrap + the package's Depends, scripts/deb-root) is cached; each run installs
# into a throw-away overlay of it. Skips (77) only when the mirror is unreachable and no cached
# root exists. Usage: test_deb.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d /tmp/bitlens-deb.XXXXXX)
source "$src/tests/e2e/lib.sh"
t0=$SECONDS

if [ "$(id -u)" != 0 ]; then
  # chroot and mounts need root; CI and the development machines run as root.
  skip "not root: the package test needs chroot and mounts"
  finish
  exit $?
fi

# The .deb: the one `make package` built, unless a packaged input is newer (then pack again).
deb=$(ls -t "$build"/bitlens_*_*.deb 2> /dev/null | head -1)
stale=0
if [ -z "$deb" ]; then
  stale=1
else
  for f in "$build/bin/bitlens" "$build/bin/bitlens-cli" "$build/CPackConfig.cmake" \
    "$build/cmake_install.cmake" "$build"/resources/icons/*.png "$src"/resources/*; do
    [ "$f" -nt "$deb" ] && { stale=1; break; }
  done
fi
if [ "$stale" = 1 ]; then
  start=$SECONDS
  (cd "$build" && flock .package.lock cpack -G DEB > "$tmp/cpack.log" 2>&1) || {
    echo "FAIL cpack:"; tail -20 "$tmp/cpack.log"; rm -rf "$tmp"; exit 1; }
  deb=$(ls -t "$build"/bitlens_*_*.deb | head -1)
  echo "step cpack: $((SECONDS - start)) s"
fi
echo "package: $deb ($(du -m "$deb" | cut -f1) MB)"

start=$SECONDS
"$src/scripts/deb-root" "$deb" > "$tmp/root-path" 2> "$tmp/root.log"
rc=$?
cat "$tmp/root.log"
echo "step deb-root: $((SECONDS - start)) s"
if [ "$rc" = 3 ]; then
  skip "the Debian mirror is unreachable and no cached Debian 12 root exists"
  finish
  rc=$?
  rm -rf "$tmp"
  exit $rc
elif [ "$rc" != 0 ]; then
  echo "FAIL deb-root: exit $rc"
  rm -rf "$tmp"
  exit 1
fi
base=$(tail -1 "$tmp/root-path")

# Everything below runs in a private mount namespace, so no mount outlives the test; the trap
# unmounts in order anyway.
unshare --mount --propagation private -- bash -s "$base" "$deb" "$src" "$tmp" "$build" << 'INNER'
set -uo pipefail
base=$1 deb=$2 src=$3 tmp=$4 build=$5
source "$src/tests/e2e/lib.sh"
r=$tmp/root
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2> /dev/null; done
}
trap cleanup EXIT
mkdir -p "$r" "$tmp/upper" "$tmp/work"
if mount -t overlay overlay -o "lowerdir=$base,upperdir=$tmp/upper,workdir=$tmp/work" "$r" 2> /dev/null; then
  mounts+=("$r")
else
  echo "overlayfs unavailable: copying the root"
  cp -a "$base/." "$r/"
fi
mount -t proc proc "$r/proc" && mounts+=("$r/proc")
mount --bind /dev "$r/dev" && mounts+=("$r/dev")
mkdir -p "$r/mnt/pkg" "$r/tmp/m"
mount --bind -o ro "$(dirname "$deb")" "$r/mnt/pkg" && mounts+=("$r/mnt/pkg")
cp "$src/tests/data/onnx/small_cnn.onnx" "$src/tests/data/onnx/small_cnn_input.npy" "$r/tmp/m/"
inroot() { chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# apt resolves the Depends; they are in the cached root already, so nothing is downloaded.
# --no-install-recommends: the Depends alone must be enough.
check apt-install 0 inroot env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
  -o Dpkg::Options::=--force-unsafe-io "/mnt/pkg/$(basename "$deb")"
expect installed grep -q "^Status: install ok installed" <(inroot dpkg -s bitlens)
expect no-download bash -c "! grep -qE '^Get:[0-9]+ (http|https|ftp)' '$tmp/out'"

check version 0 inroot bitlens-cli --version
expect version-says grep -qE "^bitlens-cli [0-9.]+ \(LibTorch [0-9.]+" "$tmp/out"
check gui-version 0 inroot env QT_QPA_PLATFORM=offscreen bitlens --version
# Every library from /usr/lib/bitlens or the system; none missing, none from a build or venv.
for b in bitlens bitlens-cli; do
  check "ldd-$b" 0 inroot ldd "/usr/bin/$b"
  expect "ldd-$b-found" bash -c "! grep -q 'not found' '$tmp/out'"
  expect "ldd-$b-torch" grep -qE "libtorch_cpu.so => /usr/(bin/\.\./)?lib/bitlens/" "$tmp/out"
  expect "ldd-$b-no-cache" bash -c "! grep -qE '\.cache|site-packages|/work/' '$tmp/out'"
done
expect runpath bash -c "readelf -d '$r/usr/bin/bitlens' | grep -q 'RUNPATH.*\[\$ORIGIN/../lib/bitlens\]'"

check quantize 0 inroot bitlens-cli quantize /tmp/m/small_cnn.onnx --scheme static-int8 \
  --calib /tmp/m/small_cnn_input.npy --report /tmp/m/report.json
expect quantize-report python3 -c "
import json
d = json.load(open('$r/tmp/m/report.json'))
for k in ['bitlens_version', 'model', 'scheme', 'size_bytes', 'layers']: assert k in d, k
assert d['layers'] and all(l['weight_type'] == 'int8' for l in d['layers']), d['layers']
s = d['size_bytes']; assert 0 < s['quantized'] < s['float'], s
"

# The planner reads the cards file the package installs (share/bitlens/hardware).
expect cards-installed test -s "$r/usr/share/bitlens/hardware/accelerators.json"
check plan 0 inroot bitlens-cli plan bloom-176b --gpu a100-80gb --json
expect plan-eight python3 -c "
import json
d = json.load(open('$tmp/out')); assert d['tensor_parallel'] == 8 and d['min_gpus'] == 5, d
"

# The GUI opens the model and the data, runs static-int8 and saves the window with its charts.
check screenshot 0 inroot env QT_QPA_PLATFORM=offscreen bitlens /tmp/m/small_cnn.onnx \
  --data /tmp/m/small_cnn_input.npy --scheme static-int8 --screenshot /tmp/m/shot.png
expect screenshot-ran grep -q "bitlens: static-int8 ran in" "$tmp/err"
shot=$r/tmp/m/shot.png
# Kept for a look: the window as the installed package draws it.
cp "$shot" "$build/tests/package/screenshot.png" 2> /dev/null
expect screenshot-png bash -c "[ -s '$shot' ] && [ \$(stat -c %s '$shot') -gt 10000 ]"
# A real window: at least 640x400 and many colours (a blank or failed grab has a handful).
expect screenshot-content bash -c "
  read -r w h n < <(identify -format '%w %h %k\n' '$shot') && echo \"screenshot \${w}x\${h}, \$n colours\" &&
  [ \"\$w\" -ge 640 ] && [ \"\$h\" -ge 400 ] && [ \"\$n\" -ge 50 ]"

desktop=$r/usr/share/applications/org.bitlens.BitLens.desktop
expect desktop-installed test -f "$desktop"
if command -v desktop-file-validate > /dev/null; then
  check desktop-valid 0 desktop-file-validate "$desktop"
fi
expect desktop-exec grep -q "^Exec=bitlens " "$desktop"
expect desktop-icon grep -q "^Icon=bitlens$" "$desktop"
for size in 16 32 48 64 128 256; do
  png=$r/usr/share/icons/hicolor/${size}x${size}/apps/bitlens.png
  expect "icon-$size" bash -c "[ \"\$(identify -format '%wx%h' '$png')\" = '${size}x${size}' ]"
done
expect icon-svg test -s "$r/usr/share/icons/hicolor/scalable/apps/bitlens.svg"
expect metainfo test -s "$r/usr/share/metainfo/org.bitlens.BitLens.metainfo.xml"
expect mime test -s "$r/usr/share/mime/packages/bitlens.xml"

# Removal leaves nothing of ours behind.
check remove 0 inroot dpkg --purge bitlens
expect removed bash -c "[ ! -e '$r/usr/bin/bitlens' ] && [ ! -e '$r/usr/lib/bitlens' ]"
finish
INNER
rc=$?
echo "package test: $((SECONDS - t0)) s"
# The mounts lived in the namespace only; never delete through one that did not go away.
if findmnt -rn -o TARGET | grep -q "^$tmp"; then
  echo "FAIL: mounts left under $tmp; not deleting it"
  exit 1
fi
rm -rf --one-file-system "$tmp"
exit $rc
