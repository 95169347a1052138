#!/usr/bin/env bash
# The test suite under load: RUNS passes in a row of `pytest -n WORKERS` (pytest-xdist) beside
# BURNERS busy-looping processes, stopping at the first pass that fails. A CI machine is
# loaded: a test that passes only on a quiet one depends on timing, and this finds it.
#
#   benchmarks/stress_suite.sh [RUNS] [-- PYTEST_ARGS...]
#
# RUNS defaults to 5. PYTEST_ARGS default to the whole suite; name test files to probe only
# those. Environment: WORKERS (4), BURNERS (2), PYTHON (.venv/bin/python), and whatever the
# suite reads (LEDGER_TEST_BACKEND=postgres with LEDGER_TEST_PG_URL for the PostgreSQL pass,
# which also wants PYTEST_ARGS='-m "not sqlite_only"').
# Prints one line per pass: its number, its exit status, the summary pytest printed, and
# its wall time. Exit status: 0 when every pass passed, else the failing pass's.
set -uo pipefail
cd "$(dirname "$0")/.."

RUNS=5
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  RUNS="$1"
  shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
case "$RUNS" in
  '' | *[!0-9]*) echo "Error: RUNS must be a whole number, not '$RUNS'" >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-.venv/bin/python}"
WORKERS="${WORKERS:-4}"
BURNERS="${BURNERS:-2}"
if ! "$PYTHON" -c "import xdist" 2>/dev/null; then
  echo "Error: $PYTHON has no pytest-xdist (pip install -e '.[dev]')" >&2
  exit 2
fi

burners=()
suite=""
stop_all() {
  # Only the processes this script started, by their ids: the pass in flight, the burners.
  if [ -n "$suite" ]; then
    kill "$suite" 2>/dev/null
    wait "$suite" 2>/dev/null
    suite=""
  fi
  for pid in "${burners[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${burners[@]}"; do
    wait "$pid" 2>/dev/null
  done
  burners=()
}
trap stop_all EXIT
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

for _ in $(seq "$BURNERS"); do
  "$PYTHON" -c "while True: pass" &
  burners+=("$!")
done
echo "stress: $RUNS passes of pytest -n $WORKERS beside $BURNERS CPU burners (pids ${burners[*]})"

logdir="$(mktemp -d "${TMPDIR:-/tmp}/ledger-stress.XXXXXX")"
for run in $(seq "$RUNS"); do
  log="$logdir/pass-$run.log"
  started=$SECONDS
  # In the background and waited for, so that a signal to this script is acted on at once
  # (tests/conftest.py gives the suite's Ctrl-C tests back the SIGINT this ignores).
  "$PYTHON" -m pytest -n "$WORKERS" -p no:cacheprovider -q "$@" >"$log" 2>&1 &
  suite=$!
  wait "$suite"
  status=$?
  suite=""
  summary="$(grep -E '[0-9]+ (passed|failed|errors?|skipped)' "$log" | tail -n 1 | tr -d '=' | sed 's/^ */ /')"
  echo "pass $run/$RUNS: exit $status,${summary:- no summary} ($((SECONDS - started)) s)"
  if [ "$status" -ne 0 ]; then
    echo "stress: pass $run failed; its output is $log. Failures:"
    grep -E '^(FAILED|ERROR) ' "$log" || tail -n 40 "$log"
    exit "$status"
  fi
done
rm -rf "$logdir"
echo "stress: all $RUNS passes passed"
