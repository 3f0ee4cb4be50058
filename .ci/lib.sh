# Sourced by the .ci scripts: stage timing.
#   ci_stage NAME CMD...   runs CMD, prints "=== NAME: S s" to stderr (stdout stays CMD's) and,
#                          when NNPOPS_CI_TIMES names a file (.ci/run sets it), appends
#                          "NAME<TAB>S<TAB>ok|failed" to it; the exit status is CMD's.  CMD runs
#                          inside `||`, where bash ignores `set -e`: chain its steps with &&.
#   ci_times FILE T0       prints the table of FILE and the total since T0 (seconds since epoch).
ci_stage() {
  local name=$1 t rc=0 s
  shift
  t=$(date +%s)
  echo "=== ${name} ($(date -u +%H:%M:%S))" >&2
  "$@" || rc=$?
  s=$(($(date +%s) - t))
  echo "=== ${name}: ${s} s$([ $rc -ne 0 ] && echo " (failed, exit $rc)")" >&2
  if [ -n "${NNPOPS_CI_TIMES:-}" ]; then
    printf '%s\t%s\t%s\n' "$name" "$s" "$([ $rc -eq 0 ] && echo ok || echo failed)" >>"$NNPOPS_CI_TIMES"
  fi
  return $rc
}

ci_times() {
  local file=$1 t0=$2 total
  total=$(($(date +%s) - t0))
  echo
  echo "=== wall time per stage"
  [ -f "$file" ] && awk -F'\t' '{ printf "  %-58s %6d s  %5.1f min  %s\n", $1, $2, $2 / 60, $3 }' "$file"
  printf '  %-58s %6d s  %5.1f min\n' "total" "$total" "$(awk -v t="$total" 'BEGIN { printf "%.1f", t / 60 }')"
}
