#!/usr/bin/env bash
# Java 17+ and Maven are needed for the Kafka broker, Spark and the jar resolution; the PostgreSQL
# server programs for the local warehouse (src/upsert_kafka_ops/local/postgres.py).
# With the argument `kerberos` (make kerberos, make test): a real MIT KDC and the libraries librdkafka
# is built with for GSSAPI (scripts/build-librdkafka.sh).
# As root on Debian they are installed with apt-get; anywhere else a missing tool is a loud error.
set -euo pipefail

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}' | cut -d. -f1
}

# The folder with initdb and pg_ctl, searched in local/postgres.py's order: pg_config --bindir,
# /usr/lib/postgresql/<highest version>/bin, PATH.
pg_bindir() {
  local d
  d="$(pg_config --bindir 2>/dev/null || true)"
  if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  d="$(command -v pg_ctl 2>/dev/null || true)"
  if [ -n "$d" ]; then
    d="$(dirname "$(readlink -f "$d")")"
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  fi
  return 1
}

need=()
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
  need+=(openjdk-17-jdk-headless)
fi
command -v mvn >/dev/null 2>&1 || need+=(maven)
pg_bindir >/dev/null || need+=(postgresql)
if [ "${1:-}" = kerberos ]; then
  # the KDC and its admin tool (tests/devservices/kdc.py), kinit (librdkafka renews tickets with it)
  command -v krb5kdc >/dev/null 2>&1 || [ -x /usr/sbin/krb5kdc ] || need+=(krb5-kdc)
  command -v kadmin.local >/dev/null 2>&1 || [ -x /usr/sbin/kadmin.local ] || need+=(krb5-admin-server)
  command -v kinit >/dev/null 2>&1 || need+=(krb5-user)
  command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
  # librdkafka's build: a header of each library, and the Cyrus SASL GSSAPI plugin
  for pair in sasl/sasl.h:libsasl2-dev openssl/ssl.h:libssl-dev zlib.h:zlib1g-dev zstd.h:libzstd-dev \
      lz4.h:liblz4-dev curl/curl.h:libcurl4-openssl-dev; do
    [ -f "/usr/include/${pair%%:*}" ] || [ -f "/usr/include/x86_64-linux-gnu/${pair%%:*}" ] || need+=("${pair#*:}")
  done
  ls /usr/lib/*/sasl2/libgssapiv2.so* >/dev/null 2>&1 || need+=(libsasl2-modules-gssapi-mit)
fi

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "toolchain: installing ${need[*]} with apt-get"
    apt-get update -q
    if [[ " ${need[*]} " == *" postgresql "* ]]; then
      # The tests start their own server on a free port: no system cluster on 5432 (Debian's default).
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-common
      sed -i 's/^#\?\s*create_main_cluster\s*=.*/create_main_cluster = false/' /etc/postgresql-common/createcluster.conf
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
  else
    echo "ERROR: missing ${need[*]}." >&2
    echo "  Install them, e.g. on Debian/Ubuntu: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
fi

py="${PYTHON:-python3.11}"
if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null; then
  echo "ERROR: Python 3.11 is required (tried '$py'); set PYTHON=/path/to/python3.11." >&2
  exit 1
fi
echo "toolchain: java $(java_major), $(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g'), $("$py" --version), $("$(pg_bindir)/postgres" --version)"
