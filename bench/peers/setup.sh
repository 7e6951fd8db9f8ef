#!/usr/bin/env bash
# Create one virtualenv per peer framework under bench/peers/.venvs/<name>.
#
# Usage: bash bench/peers/setup.sh [--if-needed] [name ...]   (default: every peer)
# Names: langchain, pydantic_ai, openai_agents, google_adk. With --if-needed, a venv is (re)built
# only when it is missing or was built from other pins (its .pins marker differs).
# The interpreter is $PEER_PYTHON if set, else python3.11 (the same minor version as loopware's
# venv, so interpreter speed is not a variable), else python3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venvs="$here/.venvs"
py="${PEER_PYTHON:-$(command -v python3.11 || command -v python3)}"

# Pinned to the newest releases verified to install and run the scenario here. LangChain: 1.5.0
# needs langchain-core>=1.8, whose releases need a certifi newer than any on the index, so the
# newest installable set is langchain 1.4.7 / langchain-core 1.7.2.
declare -A pins=(
    [langchain]="langchain==1.4.7 langchain-core==1.7.2 langgraph==1.2.22"
    [pydantic_ai]="pydantic-ai-slim==2.68.0"
    [openai_agents]="openai-agents==0.24.0"
    [google_adk]="google-adk==2.13.0"
)

if_needed=0
if [ "${1:-}" = "--if-needed" ]; then
    if_needed=1
    shift
fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    names=(langchain pydantic_ai openai_agents google_adk)
fi

mkdir -p "$venvs"
failed=0
for name in "${names[@]}"; do
    if [ -z "${pins[$name]:-}" ]; then
        echo "setup.sh: unknown peer '$name'" >&2
        exit 2
    fi
    target="$venvs/$name"
    if [ "$if_needed" = 1 ] && [ "$(cat "$target/.pins" 2>/dev/null)" = "${pins[$name]}" ]; then
        continue
    fi
    echo "setup.sh: creating $target (${pins[$name]})" >&2
    rm -rf "$target"
    "$py" -m venv "$target"
    # shellcheck disable=SC2086  # the pin list is meant to split into words
    # Keep pip's own errors; drop the per-package notes about unused local index locations.
    if ! "$target/bin/python" -m pip install --quiet --disable-pip-version-check ${pins[$name]} \
        2> >(grep -v '^WARNING: Location' >&2); then
        echo "setup.sh: installing $name failed" >&2
        rm -rf "$target"
        failed=1
        continue
    fi
    printf '%s\n' "${pins[$name]}" > "$target/.pins"
done
exit "$failed"
