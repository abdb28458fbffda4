#!/usr/bin/env bash
# Print the README's Nth set-up command (1: install and demo, 2: tests): the Nth line of its first
# ```bash block, without the trailing comment. CI runs what this prints, so the README cannot drift.
set -euo pipefail
n=${1:?usage: readme_command.sh N}
awk -v n="$n" '/^```bash/ && !seen {inside=1; seen=1; next} inside && /^```/ {exit} inside {i++; if (i==n) {sub(/[ \t]+#.*$/, ""); print; exit}}' \
  "$(dirname "$0")/../README.md"
