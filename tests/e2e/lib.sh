# Shared helpers of the end-to-end scripts: check (exit code), expect (a condition), report
# (a Python assertion over a JSON file), skip (a part that cannot run here, with the reason).
# Each script sets $tmp and counts into passed/failed/skipped. finish exits 1 on any failure,
# else 77 when a part was skipped (CTest's SKIP_RETURN_CODE: the test shows as Skipped, never
# as Passed), else 0.
passed=0
failed=0
skipped=0
skip_reasons=()
py=${BITLENS_PYTHON:-$HOME/.cache/bitlens/venv/bin/python}
[ -x "$py" ] || py=python3

check() { # check NAME EXPECTED_EXIT COMMAND...
  local name=$1 want=$2
  shift 2
  local start=$SECONDS
  "$@" > "$tmp/out" 2> "$tmp/err"
  local got=$?
  # Each step's wall time in the test log (ctest --output-on-failure / -V), to find slow steps.
  echo "step $name: $((SECONDS - start)) s"
  if [ "$got" = "$want" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: exit $got, expected $want"
    sed 's/^/  stdout: /' "$tmp/out" | head -20
    sed 's/^/  stderr: /' "$tmp/err" | head -20
  fi
}
expect() { # expect NAME CONDITION...
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $name"; fi
}
report() { "$py" -c "import json,sys; d=json.load(open('$1')); $2"; }
skip() { # skip REASON: a part of the script that cannot run on this machine
  skipped=$((skipped + 1))
  skip_reasons+=("$1")
  echo "SKIP: $1"
}
finish() {
  if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
    for r in "${skip_reasons[@]}"; do echo "  skipped: $r"; done
  else
    echo "$passed passed, $failed failed"
  fi
  [ "$failed" = 0 ] || return 1
  [ "$skipped" = 0 ] || return 77
  return 0
}
