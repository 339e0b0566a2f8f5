#!/usr/bin/env bash
# The PostgreSQL server's own ceiling for leases in the record's row, from
# pgbench (a C client): raw's read-modify-write (raw.sql) and lease-row's
# two statements (lease-row.sql) on 1,000 rows, 8 clients each on rows of
# their own, in turns, ROUNDS rounds (5) of SECONDS_PER_ROUND seconds (5)
# each. Prints each round's transactions per second and the ratio, and
# checks that every transaction's write was applied once (the balances sum
# to the count).
#
#   bash bench/pgbench/run.sh 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
#
# Without an argument, psql and pgbench connect as libpq's PG* variables
# say. It creates, fills and drops the schema gormlock_pgbench (one run at
# a time). Needs bash 4.4 or later; raw and lease-row swap places every
# other round.
set -euo pipefail
db=()
if [ -n "${1:-}" ]; then db=("$1"); fi
cd "$(dirname "$0")"
rounds=${ROUNDS:-5}
seconds=${SECONDS_PER_ROUND:-5}
pgbench=$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1 || true)
[ -n "$pgbench" ] && [ -x "$pgbench" ] || { echo "run.sh: pgbench not found" >&2; exit 1; }
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
trap 'psql -q -c "DROP SCHEMA IF EXISTS gormlock_pgbench CASCADE" "${db[@]}" || true' EXIT
psql -q -v ON_ERROR_STOP=1 -f setup.sql "${db[@]}"
total=0
for r in $(seq 1 "$rounds"); do
  declare -A tps=()
  order=(raw lease-row)
  if (( r % 2 == 0 )); then order=(lease-row raw); fi
  for s in "${order[@]}"; do
    out=$("$pgbench" -n -M prepared -c 8 -j 2 -T "$seconds" -f "$s.sql" "${db[@]}" 2>&1) || { echo "$out" >&2; exit 1; }
    n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    [ -n "$n" ] || { echo "$out" >&2; echo "run.sh: $s: no transaction count in pgbench's output" >&2; exit 1; }
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
    [ "${failed:-0}" = 0 ] || { echo "$out" >&2; echo "run.sh: $s: failed transactions" >&2; exit 1; }
    total=$((total + n))
    tps[$s]=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out" | tail -1)
  done
  line="round $r: raw ${tps[raw]} tps, lease-row ${tps[lease-row]} tps,"
  echo "$line lease-row / raw $(awk -v a="${tps[lease-row]}" -v b="${tps[raw]}" 'BEGIN { printf "%.3f", a / b }')"
done
sum=$(psql -Atq -c "SELECT sum(balance) FROM gormlock_pgbench.accounts" "${db[@]}")
[ "$sum" = "$total" ] || { echo "run.sh: the balances sum to $sum, not $total: writes lost or doubled" >&2; exit 1; }
echo "the balances sum to $total, one per transaction"
