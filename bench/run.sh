#!/usr/bin/env bash
# make bench: Kiln against the ffmpeg command on the same inputs in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/bench.py "$@"
