# Sourced by scripts/test.sh: runs steps, goes on after a failure, and
# counts everything for one closing line. Needs $work (a scratch directory)
# and $UFSKIT_SKIP_LEDGER (skipped tests, one line each, written by the
# tests themselves through testkit::prerequisite, or by the caller).
#   tests_step NAME CMD...  a test harness: its "test result: ... N passed;
#                           M failed" lines are counted; the step fails as
#                           a whole if CMD fails with no failed test (a
#                           build error)
#   step NAME CMD...        any other check: one count (CMD runs with set -e)
#   summary                 the ten slowest steps, the skipped and failed
#                           lists and the line "N passed, N failed, N
#                           skipped"; exit status 1 on any failure
# timings holds "SECONDS s  NAME" per step, for the summary (CI has a time
# budget).
passed=0 failed=0 failures=() timings=()

tests_step() {
  local name=$1 log t0=$SECONDS
  shift
  log=$work/tests-$((passed + failed)).log
  echo "== $name"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]} p f
  timings+=("$((SECONDS - t0)) s  $name")
  p=$(awk '/^test result:/ {s += $4} END {print s + 0}' "$log")
  f=$(awk '/^test result:/ {s += $6} END {print s + 0}' "$log")
  passed=$((passed + p))
  failed=$((failed + f))
  if [ "$f" -gt 0 ]; then
    failures+=("$name: $f test(s), see $log")
  elif [ "$rc" -ne 0 ]; then
    failed=$((failed + 1))
    failures+=("$name: exit $rc with no failed test (a build error?), see $log")
  fi
}

step() {
  local name=$1 t0=$SECONDS
  shift
  echo "== $name"
  # Not inside an `if`: bash ignores set -e in a condition's subshell too.
  ( set -e; "$@" )
  local rc=$?
  timings+=("$((SECONDS - t0)) s  $name")
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$name (exit $rc)")
  fi
}

# A skipped test returned early, so its harness counted it as passed: it
# moves to the skipped count. Ledger lines that name a step's missing
# tool ("crashtest --mount: ...") were not counted by any harness.
summary() {
  local skipped tests_skipped
  skipped=$(grep -c '' "$UFSKIT_SKIP_LEDGER")
  tests_skipped=$(grep -vc '^[a-z -]*--[a-z]*: ' "$UFSKIT_SKIP_LEDGER")
  passed=$((passed - tests_skipped))
  echo
  echo "slowest steps (wall time):"
  printf '%s\n' "${timings[@]}" | sort -rn | head -10 | sed 's/^/  /'
  if [ "$skipped" -gt 0 ]; then
    echo "skipped (prerequisites missing):"
    sed 's/^/  /' "$UFSKIT_SKIP_LEDGER"
  fi
  if [ "$failed" -gt 0 ]; then
    echo "failed:"
    printf '  %s\n' "${failures[@]}"
  fi
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
}
