#!/usr/bin/env bash
# Run the asv suite over the project's recent history and publish the HTML report.
#
#   asv_bench/run_history.sh            # the last 10 commits of main
#   asv_bench/run_history.sh 30         # the last 30
#   asv_bench/run_history.sh 5 --quick  # extra arguments go to `asv run`
#
# asv builds ctok (a Cython build) for each commit in its own virtualenv (asv_bench/env/), runs the suite, stores
# the results in asv_bench/results/ and writes the report to asv_bench/html/.  View it with
#   cd asv_bench && asv preview          # then open http://127.0.0.1:8080
# Commits already measured on this machine are skipped (--skip-existing-commits).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
n="${1:-10}"
shift || true
asv machine --yes >/dev/null
# asv run takes a git range: HEAD~n..HEAD (fewer when the history is shorter).
total=$(git -C .. rev-list --count HEAD)
if [ "$n" -ge "$total" ]; then range="ALL"; else range="HEAD~${n}..HEAD"; fi
asv run --skip-existing-commits --show-stderr "$@" "$range"
asv publish
echo "report written to $(pwd)/html; view it with: cd $(pwd) && asv preview"
