#!/usr/bin/env bash
# Run the peer benchmark and print one comparison table.
#
# Usage: bash bench/peers/run.sh
# Builds a peer's venv (setup.sh) only when it is missing or its pins changed, then runs every
# scenario script in its own process, one after another (never in parallel: they would disturb
# each other's timings). A script that fails becomes a "skipped" row with the reason; the table is
# printed whatever happens. Knobs: LOOPWARE_PYTHON (default: the repo's .venv), PEERS_TURNS,
# PEERS_REPEATS, PEERS_WARMUP (see _scenario.py), PEERS_ONLY="loopware langchain ..." to run a
# subset.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
loopware_python="${LOOPWARE_PYTHON:-$repo/.venv/bin/python}"
peers=(langchain pydantic_ai openai_agents google_adk)
only=" ${PEERS_ONLY:-loopware ${peers[*]}} "
results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT

# skip NAME REASON: record a skipped row.
skip() {
    printf '%s\n' "$2" > "$results/$1.skip"
    echo "run.sh: $1 skipped: $2" >&2
}

# run_script NAME PYTHON [ENV=VALUE ...]: run NAME's scenario, keep its JSON line or the reason.
run_script() {
    local name="$1" python="$2"
    shift 2
    echo "run.sh: running $name" >&2
    env "$@" "$python" "$here/${name}_scenario.py" > "$results/$name.json" 2> "$results/$name.err"
    local status=$?
    [ "$status" -eq 0 ] && return
    local reason
    reason="$(grep -m1 '^FAILED: ' "$results/$name.err" | cut -c9-)"
    [ -n "$reason" ] || reason="$(grep -v '^\s*$' "$results/$name.err" | tail -n1)"
    rm -f "$results/$name.json"
    skip "$name" "script failed: ${reason:-exit status $status} (run it alone to see the traceback)"
}

if [ ! -x "$loopware_python" ]; then
    loopware_python=""
fi

# The floor, once, in loopware's interpreter (every venv here is the same CPython minor).
"${loopware_python:-python3}" "$here/floor.py" > "$results/floor.json"

if [[ "$only" == *" loopware "* ]]; then
    if [ -z "$loopware_python" ]; then
        skip loopware "no interpreter: set LOOPWARE_PYTHON or create $repo/.venv (.ci/run does)"
    else
        run_script loopware "$loopware_python" "PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}"
    fi
fi

for peer in "${peers[@]}"; do
    [[ "$only" == *" $peer "* ]] || continue
    if ! bash "$here/setup.sh" --if-needed "$peer"; then
        skip "$peer" "could not build bench/peers/.venvs/$peer (see setup.sh output above)"
        continue
    fi
    run_script "$peer" "$here/.venvs/$peer/bin/python"
done

"${loopware_python:-python3}" "$here/report.py" "$results"
