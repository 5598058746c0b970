#!/usr/bin/env bash
# Java 17+ and Maven are needed for the Kafka broker, Spark and the jar resolution.
# As root on Debian they are installed with apt-get; anywhere else a missing tool is a loud error.
set -euo pipefail

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}' | cut -d. -f1
}

need=()
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
  need+=(openjdk-17-jdk-headless)
fi
command -v mvn >/dev/null 2>&1 || need+=(maven)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "toolchain: installing ${need[*]} with apt-get"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
  else
    echo "ERROR: missing ${need[*]}." >&2
    echo "  Install Java 17 and Maven, e.g. on Debian/Ubuntu: sudo apt-get install -y openjdk-17-jdk-headless maven" >&2
    exit 1
  fi
fi

py="${PYTHON:-python3.11}"
if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null; then
  echo "ERROR: Python 3.11 is required (tried '$py'); set PYTHON=/path/to/python3.11." >&2
  exit 1
fi
echo "toolchain: java $(java_major), $(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g'), $("$py" --version)"
