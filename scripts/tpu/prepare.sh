#!/usr/bin/env bash
# Build .tpu/ here (git ignores it; the device machine receives it as a carried path): MaxText's
# source at the commit the recorded runs used, with the two-line Python 3.11 patch, the wheels
# the TPU machine's own package index lacks (MaxText's and sweepd's), and the pins to install.
#
#   MAXTEXT_GIT=/path/to/maxtext/.git scripts/tpu/prepare.sh
#
# MAXTEXT_GIT: a clone of github.com/AI-Hypercomputer/maxtext holding commit $COMMIT (default:
# clone it). The TPU machine reaches no network: everything it installs travels in .tpu/.
set -euo pipefail
cd "$(dirname "$0")/../.."
COMMIT=e591f30cbbf217ed67ef71263ec0538239f9c3b8
HERE=scripts/tpu
OUT=.tpu
EXCLUDE=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$EXCLUDE")"
grep -qx '/.tpu/' "$EXCLUDE" 2>/dev/null || echo '/.tpu/' >> "$EXCLUDE"
mkdir -p "$OUT/mt" "$OUT/whl"
if [ -z "${MAXTEXT_GIT:-}" ]; then
  MAXTEXT_GIT=$(mktemp -d)/maxtext.git
  git clone --bare --filter=blob:none https://github.com/AI-Hypercomputer/maxtext "$MAXTEXT_GIT"
fi
# src/ only, file by file: a partial mirror may lack a few tokenizer blobs MaxText does not read here.
rm -rf "$OUT/mt/src"
git --git-dir="$MAXTEXT_GIT" ls-tree -r "$COMMIT" src | while read -r _ _ sha path; do
  mkdir -p "$OUT/mt/$(dirname "$path")"
  git --git-dir="$MAXTEXT_GIT" cat-file blob "$sha" > "$OUT/mt/$path" 2>/dev/null \
    || { echo "not in the clone (unused here): $path"; rm -f "$OUT/mt/$path"; }
done
(cd "$OUT/mt" && patch -s -p1 < "../../$HERE/py311.patch")
# Wheels for CPython 3.11 on x86-64 that the machine's index (/opt/pypi/simple) does not hold.
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$OUT/whl" "$@"
}
download -r "$HERE/maxtext_wheels.txt"
# sweepd's own needs that the index lacks (sweepd_wheels.txt; the rest of sweepd_reqs.txt is
# there at those versions); python-hostlist is published as a source distribution only.
download $(grep -v '^python-hostlist' "$HERE/sweepd_wheels.txt")
python3 -m pip wheel -q --no-deps -w "$OUT/whl" "$(grep '^python-hostlist' "$HERE/sweepd_wheels.txt")"
cp "$HERE/run.sh" "$OUT/run.sh"
du -sh "$OUT"
