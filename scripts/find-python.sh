# Sourced by the scripts that need a given Python (scripts/lanes.sh, scripts/wheel-check.sh).
# find_python 3.X: python3.X on PATH if it runs, else pyenv's newest 3.X; an error naming the fix.
find_python() {
  local v=$1 candidate
  for candidate in "$(command -v "python$v" || true)" \
    $(command -v pyenv >/dev/null && ls -d "$(pyenv root)"/versions/"$v".*/bin/"python$v" 2>/dev/null | sort -rV); do
    # a pyenv shim is on PATH even when that version is not selected: take one that runs
    if [ -n "$candidate" ] && "$candidate" -c 'import sys' >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  echo "ERROR: Python $v is needed (python$v on PATH, or pyenv install $v)." >&2
  return 1
}
