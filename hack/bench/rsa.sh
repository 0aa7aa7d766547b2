#!/usr/bin/env bash
# The RSA-3072 signing limit of this machine, by every implementation at hand, in one run:
# `openssl speed rsa3072` on one core and with -multi 2, and one-thread sign/s of the issuer's
# signer (AWS-LC), OpenSSL through josekit and through the `openssl` crate's Signer (a fresh
# context per signature each) and ring, interleaved round by round (`issuer/benches/rsa.rs`),
# each also set against the issuer's signer in the same rounds. The limit refresh grants are set
# against is the faster of openssl speed -multi 2 and the issuer's signer on two threads
# (`hack/bench/issuer.sh`). Writes hack/bench/results/rsa.md (printed too).
# Usage: hack/bench/rsa.sh [seconds for openssl speed, default 10; 3 with ICHOR_BENCH_SHORT=1]
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
seconds="${1:-$(full_or_short 10 3)}"
export RSA_BENCH_ROUNDS="${RSA_BENCH_ROUNDS:-$(full_or_short 40 10)}"
speed() { openssl speed "$@" -seconds "$seconds" rsa3072 2>/dev/null | awk '/^rsa 3072 bits/ {v=$(NF-1)} END {print v}'; }
one=$(speed)
out=$(cargo bench -q -p ichor-issuer --bench rsa)
multi=$(speed -multi 2)
echo "$out"
field() { grep "signer=$1 " <<<"$out" | sed -n "s/.*\b$2=\([^ ]*\).*/\1/p"; }
figure "RSA-3072 sign/s, the issuer's signer, one thread (baseline: openssl speed, one core)" "$(field issuer sign_per_s)" "$one" ">= 0.95"
figure "RSA-3072 sign/s, ring, one thread (baseline: the issuer's signer in the same rounds)" "$(field ring of_issuer)" "1" "<= 1.05 (else the issuer should use ring)"
figure "RSA-3072 sign/s, openssl speed -multi 2 (baseline: one core)" "$multi" "$one" "2.00"
report="$results_dir/rsa.md"
{
  echo "# RSA-3072 signing by implementation, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r); $(openssl version); shared with other builds."
  echo "\`hack/bench/rsa.sh\` (commit $(git rev-parse --short HEAD)); openssl speed ${seconds} s each (before and after the"
  echo "crates); the crates interleaved, $RSA_BENCH_ROUNDS rounds of 20 signatures each, medians."
  echo
  echo "| signer | sign/s | / openssl speed, one core | / the issuer's signer, same rounds |"
  echo "|---|---|---|---|"
  echo "| openssl speed rsa3072 (one core) | $one | 1.00 | - |"
  echo "| openssl speed -multi 2 rsa3072 | $multi | $(awk -v a="$multi" -v b="$one" 'BEGIN {printf "%.2f", a / b}') | - |"
  for s in issuer josekit openssl-crate ring; do
    echo "| $s, one thread | $(field "$s" sign_per_s) | $(awk -v a="$(field "$s" sign_per_s)" -v b="$one" 'BEGIN {printf "%.2f", a / b}') | $(field "$s" of_issuer) |"
  done
} >"$report"
cat "$report"
