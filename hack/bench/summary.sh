# Sourced by every hack/bench script: its short form and the figures hack/bench/all.sh gathers.
#  ICHOR_BENCH_SHORT=1     the short form: the script's defaults shrink so it ends within a minute
#                          or two (arguments given on the command line still win);
#  ICHOR_BENCH_SUMMARY=F   each figure is also appended to F as one tab-separated line: figure,
#                          value, baseline (measured in the same run), value/baseline, goal;
#  ICHOR_BENCH_RESULTS=D   where the script writes its own report (default hack/bench/results;
#                          all.sh points it elsewhere so short runs never replace full reports).
bench_short() { [[ "${ICHOR_BENCH_SHORT:-}" == 1 ]]; }
# full_or_short FULL SHORT: the default that fits the mode.
full_or_short() { if bench_short; then echo "$2"; else echo "$1"; fi; }
results_dir="${ICHOR_BENCH_RESULTS:-hack/bench/results}"
mkdir -p "$results_dir"
# figure NAME VALUE BASELINE GOAL: one line of the summary (the ratio is VALUE / BASELINE).
figure() {
  local ratio
  ratio=$(awk -v a="$2" -v b="$3" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else print "-" }')
  if [[ -n "${ICHOR_BENCH_SUMMARY:-}" ]]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$ratio" "$4" >>"$ICHOR_BENCH_SUMMARY"
  fi
  return 0
}
