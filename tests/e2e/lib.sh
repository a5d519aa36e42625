# Shared helpers of the end-to-end scripts: check (exit code), expect (a condition), report
# (a Python assertion over a JSON file). Each script sets $tmp and counts into passed/failed.
passed=0
failed=0
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
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}
