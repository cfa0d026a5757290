#!/usr/bin/env bash
# The second demo: the closed loop on the simulator. Three RCT days of a demo campaign, then every day:
# promo run (models → leaderboard → champion → decisions with an exploration share → outbox files)
# → the simulated population answers the exported decisions of one budget (promo simulate --respond-to)
# → the next promo run ingests that day, with the decisions' propensities, and decides again.
# Settings (environment): LOOP_CAMPAIGN [loop], LOOP_DAYS [7] loop days, LOOP_EXPLORATION [0.05]
# exploration share, LOOP_BUDGET [1] the budget deployed, LOOP_USERS [5000], LOOP_CONSTRAINTS [0] (1: the
# decisions also keep an SMS cost type and a cap on Shanghai's coupon spend, docs/decisions.md); PROMO_* as for demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/dagster_home}"
export PROMO_LANDING_DIR="${PROMO_LANDING_DIR:-$PWD/data/landing}"
export PROMO_WAREHOUSE="${PROMO_WAREHOUSE:-$PWD/data/warehouse.duckdb}"
export PROMO_OUTBOX_DIR="${PROMO_OUTBOX_DIR:-$PWD/data/outbox}"
CAMPAIGN="${LOOP_CAMPAIGN:-loop}"
DAYS="${LOOP_DAYS:-7}"
SHARE="${LOOP_EXPLORATION:-0.05}"
BUDGET="${LOOP_BUDGET:-1}"
USERS="${LOOP_USERS:-5000}"
CONSTRAINTS="${LOOP_CONSTRAINTS:-0}"
PY=.venv/bin/python
PROMO=.venv/bin/promo

if [[ ! -f "$PROMO_LANDING_DIR/$CAMPAIGN/campaign.yaml" ]]; then
  start=$($PY -c "import datetime as d; print(d.date.today() - d.timedelta(days=3 + $DAYS))")
  $PROMO simulate --preset demo --campaign "$CAMPAIGN" --days 3 --users "$USERS" --seed 0 --start "$start"
  # the budget whose decision file the loop answers is the deployed one (recorded with every export)
  printf 'exploration:\n  share: %s\n  seed: 0\nmonitoring:\n  budget: %s\n' "$SHARE" "$BUDGET" \
    >> "$PROMO_LANDING_DIR/$CAMPAIGN/campaign.yaml"
  if [[ "$CONSTRAINTS" == 1 ]]; then
    printf 'constraints:\n  costs:\n    sms:\n      levels: [0, 0.05, 0.05, 0.05, 0.05, 0.05]\n      budget_per_capita: 0.02\n  groups:\n    shanghai:\n      feature: city\n      equals: shanghai\n      budget_per_capita: 0.6\n' \
      >> "$PROMO_LANDING_DIR/$CAMPAIGN/campaign.yaml"
  fi
fi

for i in $(seq 1 "$DAYS"); do
  echo "== loop day $i of $DAYS: train, choose the champion, decide, export"
  $PROMO run --campaign "$CAMPAIGN" --no-progress | grep -E "^(   deploy|   why|   truth|$CAMPAIGN: (ingesting|downstream))" || true
  day=$($PY -c "import pathlib, sys; print(max(p.name for p in pathlib.Path(sys.argv[1]).iterdir() if not p.name.startswith('.')))" \
        "$PROMO_OUTBOX_DIR/$CAMPAIGN")
  file="$PROMO_OUTBOX_DIR/$CAMPAIGN/$day/$($PY -c "print(f'{float(\"$BUDGET\"):g}')").parquet"
  echo "== loop day $i of $DAYS: the simulated users answer $file"
  $PROMO simulate --respond-to "$file" --day "$day" --campaign "$CAMPAIGN"
done

cat <<MSG

Done: $DAYS days of deciding, answering and learning again. Where to look:
  the champion and why:  $PROMO report --campaign $CAMPAIGN
  the decision files:    $PROMO_OUTBOX_DIR/$CAMPAIGN/<date>/<budget>.parquet and manifest.json
  export them again:     $PROMO export --campaign $CAMPAIGN [--format csv] [--out DIR]
  the Dagster UI:        DAGSTER_HOME=$DAGSTER_HOME .venv/bin/dagster dev -w workspace.yaml
MSG
