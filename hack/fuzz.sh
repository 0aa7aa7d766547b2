#!/usr/bin/env bash
# Fuzzes every parser that sees untrusted bytes (fuzz/fuzz_targets/, cargo fuzz + libFuzzer with
# AddressSanitizer), each for a bounded time, starting from the committed seeds in
# fuzz/corpus/<target>/. Fails when a target crashes (panic, assertion, sanitizer report, OOM,
# timeout): the reproducer is left in fuzz/artifacts/<target>/.
#
# Usage: hack/fuzz.sh [seconds-per-target] [target...]
#        hack/fuzz.sh cmin [target...]
#   hack/fuzz.sh                 # 10 s per target, every target (the smoke run)
#   hack/fuzz.sh 600             # the long run: 10 minutes per target (about 2 hours 30 minutes)
#   hack/fuzz.sh 60 jws_tokens keys_json
#   hack/fuzz.sh cmin            # minimise: merge what the runs found into fuzz/corpus/
#
# Corpus minimisation (`cmin`, libFuzzer's merge, as `cargo fuzz cmin`): for each
# target, the committed seeds plus the scratch corpus the runs grew are merged into a small set
# of inputs that covers the same code edges (-set_cover_merge=1 -use_counters=0: edges, not hit
# counts, so the set stays a few hundred files at most), which replaces fuzz/corpus/<target>/. Seeds written by
# hand (any name that is not a 40-hex-digit SHA-1, e.g. `regression-...`) are always kept; the
# merged inputs are named by their SHA-1. Inputs over $ICHOR_FUZZ_CMIN_MAX_BYTES (default
# 16384) are left out, so the committed corpora stay small. Then review and commit them: every
# committed seed is a regression test of the normal suite (fuzz/targets/tests/corpus.rs).
#
# Build flags: $ICHOR_FUZZ_BUILD_FLAGS. The default depends on the run's length: under 60 s per
# target (the smoke run of hack/test.sh) "--dev": no optimisation, with debug assertions and
# overflow checks, which builds in a fraction of the time of a release build and is fast enough to
# replay the seeds and explore for seconds; 60 s or more "-O": release (cargo-fuzz forces one
# codegen unit per crate so that the coverage passes do not stop inlining), several times the
# executions per second. The two builds keep separate artifacts under $ICHOR_FUZZ_TARGET.
#
# Toolchain: $ICHOR_FUZZ_TOOLCHAIN (default stable). cargo-fuzz passes unstable compiler flags
# (-Zsanitizer=address), which a stable compiler takes with RUSTC_BOOTSTRAP=1; this script sets
# it, so no nightly toolchain is needed (ICHOR_FUZZ_TOOLCHAIN=nightly uses one). Installs
# cargo-fuzz when missing. Builds into $ICHOR_FUZZ_TARGET (default ~/.cache/ichor-fuzz-target),
# never into the workspace's target directory. New inputs the fuzzer finds go to a scratch corpus
# under that directory, so the committed seeds stay small; `hack/fuzz.sh cmin` merges them into
# fuzz/corpus/<target>/ (the root workspace's tests run every committed seed:
# fuzz/targets/tests/corpus.rs). A crash is fixed in the crate that owns the parser, with the
# reproducer as a regression test in that crate's normal test suite; reproduce one with
#   RUSTC_BOOTSTRAP=1 cargo +stable fuzz run <target> fuzz/artifacts/<target>/<crash-file>   (from the repo root)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=run
seconds="${1:-10}"
shift || true
if [[ "$seconds" == cmin ]]; then
  mode=cmin
  seconds=60
elif ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: hack/fuzz.sh [seconds-per-target] [target...] | hack/fuzz.sh cmin [target...]" >&2
  exit 2
fi

toolchain="${ICHOR_FUZZ_TOOLCHAIN:-stable}"
cargo_fuzz_version=0.13.2
default_flags=-O
((seconds < 60)) && default_flags=--dev
read -r -a build_flags <<<"${ICHOR_FUZZ_BUILD_FLAGS:-$default_flags}"

if ! cargo +"$toolchain" --version >/dev/null 2>&1; then
  echo "hack/fuzz.sh: no Rust toolchain $toolchain (ICHOR_FUZZ_TOOLCHAIN): rustup toolchain install $toolchain" >&2
  exit 1
fi
if ! cargo +"$toolchain" fuzz --version >/dev/null 2>&1; then
  echo "==> installing cargo-fuzz $cargo_fuzz_version (missing)"
  cargo +"$toolchain" install cargo-fuzz --version "$cargo_fuzz_version" --locked || {
    echo "hack/fuzz.sh: cargo-fuzz is not installed and \`cargo +$toolchain install cargo-fuzz --version $cargo_fuzz_version --locked\` failed (output above); install it by hand (it needs crates.io and a C compiler), then run again" >&2
    exit 1
  }
  cargo +"$toolchain" fuzz --version >/dev/null 2>&1 || {
    echo "hack/fuzz.sh: cargo-fuzz $cargo_fuzz_version was installed but \`cargo +$toolchain fuzz\` does not run: is ~/.cargo/bin on PATH?" >&2
    exit 1
  }
fi

export CARGO_TARGET_DIR="${ICHOR_FUZZ_TARGET:-$HOME/.cache/ichor-fuzz-target}"
# The sanitizer and coverage flags cargo-fuzz passes are unstable; a stable compiler takes them
# with this (a nightly one ignores it).
export RUSTC_BOOTSTRAP=1

mapfile -t all < <(cargo +"$toolchain" fuzz list)
if [[ ${#all[@]} -eq 0 ]]; then
  echo "hack/fuzz.sh: cargo fuzz list found no target in fuzz/" >&2
  exit 1
fi
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all[@]}")

echo "==> cargo +$toolchain fuzz build ${build_flags[*]} (${#all[@]} targets, $(rustc +"$toolchain" --version), into $CARGO_TARGET_DIR)"
started=$(date +%s)
cargo +"$toolchain" fuzz build "${build_flags[@]}"
echo "    built in $(($(date +%s) - started)) s"

for t in "${targets[@]}"; do
  if [[ ! " ${all[*]} " == *" $t "* ]]; then
    echo "hack/fuzz.sh: no target $t (targets: ${all[*]})" >&2
    exit 2
  fi
done

if [[ $mode == cmin ]]; then
  max_bytes="${ICHOR_FUZZ_CMIN_MAX_BYTES:-16384}"
  for t in "${targets[@]}"; do
    committed="fuzz/corpus/$t"
    scratch="$CARGO_TARGET_DIR/corpus/$t"
    merged="$CARGO_TARGET_DIR/cmin/$t"
    candidates="$CARGO_TARGET_DIR/cmin-candidates/$t"
    rm -rf "$merged" "$candidates"
    mkdir -p "$merged" "$candidates" "$scratch"
    # The first directory is the output: what is in it is kept, the candidates are added only
    # when they reach new coverage. Hand-written seeds go there first.
    find "$committed" -maxdepth 1 -type f -regextype posix-extended ! -regex '.*/[0-9a-f]{40}' -exec cp {} "$merged/" \;
    find "$committed" "$scratch" -maxdepth 1 -type f -size -"$((max_bytes + 1))"c -exec cp {} "$candidates/" \;
    before="$(find "$committed" -type f | wc -l) files, $(du -sk --apparent-size "$committed" | cut -f1) KiB"
    log="$CARGO_TARGET_DIR/cmin-$t.log"
    cargo +"$toolchain" fuzz run "${build_flags[@]}" "$t" "$merged" "$candidates" -- \
      -set_cover_merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=2048 >"$log" 2>&1 ||
      { echo "hack/fuzz.sh: cmin of $t failed; log: $log" >&2; tail -20 "$log" >&2; exit 1; }
    find "$committed" -maxdepth 1 -type f -regextype posix-extended -regex '.*/[0-9a-f]{40}' -delete
    find "$merged" -maxdepth 1 -type f -regextype posix-extended -regex '.*/[0-9a-f]{40}' -exec cp {} "$committed/" \;
    echo "==> $t: $before -> $(find "$committed" -type f | wc -l) files, $(du -sk --apparent-size "$committed" | cut -f1) KiB"
  done
  exit 0
fi

failed=()
for t in "${targets[@]}"; do
  scratch="$CARGO_TARGET_DIR/corpus/$t"
  artifacts="fuzz/artifacts/$t"
  mkdir -p "$scratch" "$artifacts"
  before=$(find "$artifacts" -type f | wc -l)
  echo "==> $t: ${seconds} s"
  log="$CARGO_TARGET_DIR/fuzz-$t.log"
  status=0
  # The scratch corpus comes first: libFuzzer writes new inputs into the first directory only.
  cargo +"$toolchain" fuzz run "${build_flags[@]}" "$t" "$scratch" "fuzz/corpus/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    >"$log" 2>&1 || status=$?
  # -a: a log can hold the raw bytes of a crashing input. The last block is this run's.
  grep -a -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" | tail -3 | sed 's/^/    /' || true
  after=$(find "$artifacts" -type f | wc -l)
  if [[ $status -ne 0 || $after -gt $before ]]; then
    echo "    FAILED (exit $status); log: $log; reproducers in $artifacts:" >&2
    ls -t "$artifacts" | sed 's/^/      /' >&2
    tail -40 "$log" >&2
    failed+=("$t")
  fi
done

echo "==> fuzzed ${#targets[@]} targets, ${seconds} s each, in $(($(date +%s) - started)) s"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "hack/fuzz.sh: crashes in: ${failed[*]}" >&2
  exit 1
fi
