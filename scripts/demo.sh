#!/usr/bin/env bash
# Set everything up and run the main job on the built-in demo campaign:
# environment → simulated demo campaign (14 days, 5,000 users) → `promo run` (every asset) → leaderboard.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/dagster_home}"
export PROMO_LANDING_DIR="${PROMO_LANDING_DIR:-$PWD/data/landing}"
export PROMO_WAREHOUSE="${PROMO_WAREHOUSE:-$PWD/data/warehouse.duckdb}"
if [[ ! -f "$PROMO_LANDING_DIR/demo/campaign.yaml" ]]; then
  .venv/bin/promo simulate --preset demo --campaign demo --days 14 --users 5000 --seed 0
fi
.venv/bin/promo run --campaign demo
cat <<MSG

Done. Where to look:
  warehouse:    $PROMO_WAREHOUSE   (DuckDB: rct_events, policy_evaluation, allocation, ...)
  leaderboard:  .venv/bin/promo report
  Dagster UI:   DAGSTER_HOME=$DAGSTER_HOME .venv/bin/dagster dev -w workspace.yaml   → http://127.0.0.1:3000
MSG
