#!/usr/bin/env bash
# Installs the system packages the test build needs, from Debian's apt, when they are missing:
# cmake and libclang-dev, with which the `highs` feature builds the HiGHS MILP solver from
# source (the `Milp` placement policy's branch-and-cut solver). Idempotent; needs root or sudo.
set -euo pipefail
missing=()
command -v cmake > /dev/null || missing+=(cmake)
command -v g++ > /dev/null || missing+=(g++)
ls /usr/lib/llvm-*/lib/libclang.so* > /dev/null 2>&1 || missing+=(libclang-dev)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing from apt: ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" > /dev/null
