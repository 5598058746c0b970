#!/usr/bin/env bash
# librdkafka with Kerberos (SASL GSSAPI through Cyrus libsasl2), for confluent-kafka built from source:
# the librdkafka inside confluent-kafka's Linux wheels has no GSSAPI, and the offset, bounds, lag and
# admin clients use it. Built once per machine into the user cache (every clone shares it), from the
# librdkafka sources that Confluent's own Node.js client publishes on the npm registry (the newest
# librdkafka sources this project's registries carry), checked against a pinned digest. Needs python3,
# a C compiler and make, and the -dev packages `scripts/ensure-toolchain.sh kerberos` installs.
#
#   scripts/build-librdkafka.sh DEST     builds into DEST (prefix with include/ and lib/)
set -euo pipefail

LIBRDKAFKA_VERSION=2.15.1
NPM_PACKAGE=@confluentinc/kafka-javascript@1.10.1  # its deps/librdkafka is librdkafka 2.15.1
NPM_TARBALL=https://registry.npmjs.org/@confluentinc/kafka-javascript/-/kafka-javascript-1.10.1.tgz
NPM_INTEGRITY=sha512-KVePUBn21EqCVP9mfxzEuM3SYJHHEF7X+iiC2e43QQgDSyEaksInmCGooT3w5q+cNAdkSCrK71j0ICfqoSqZLw==

dest=${1:?usage: build-librdkafka.sh DEST}
if [ -f "$dest/.built" ]; then
  exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/librdkafka.XXXXXX")
trap 'rm -rf "$work"' EXIT
tarball="$work/package.tgz"
python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$NPM_TARBALL" "$tarball"
actual=$(python3 -c 'import base64, hashlib, sys; print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tarball")
if [ "$actual" != "$NPM_INTEGRITY" ]; then
  echo "ERROR: $NPM_PACKAGE does not match its pinned digest ($actual)." >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/deps/librdkafka
src="$work/package/deps/librdkafka"
want=$(printf '0x%02x%02x%02xff' $(echo "$LIBRDKAFKA_VERSION" | tr . ' '))
grep -q "define RD_KAFKA_VERSION *$want" "$src/src/rdkafka.h" || {
  echo "ERROR: $NPM_PACKAGE does not carry librdkafka $LIBRDKAFKA_VERSION." >&2
  exit 1
}

cd "$src"
./configure --prefix="$dest" --enable-gssapi --enable-ssl --enable-curl --enable-zstd --enable-lz4-ext \
  --disable-debug-symbols >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
grep -q "WITH_SASL_CYRUS 1" config.h || {
  echo "ERROR: librdkafka was configured without Cyrus SASL (GSSAPI); is libsasl2-dev installed?" >&2
  exit 1
}
make -C src -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; exit 1; }
rm -rf "$dest"
make -C src install >"$work/install.log" 2>&1 || { tail -40 "$work/install.log" >&2; exit 1; }
touch "$dest/.built"
echo "librdkafka $LIBRDKAFKA_VERSION with GSSAPI in $dest"
