"""Decisions: the champion's allocation with an exploration share, checked, written to the outbox.

- `exploration`: `Exploration` (campaign.yaml `exploration:`), `decide_with_exploration` -> `Decision`
  (levels, which users explore, the propensity written, the value given up for exploration).
- `checks`: `check_decisions` -> `CheckOutcome` per check (every user once, spend within budget,
  valid levels, no missing values, exploration share).
- `outbox`: `write_outbox` (atomic folder per date with `manifest.json` and checksums), `verify`,
  `read_manifest`, `read_decision_file`.
- `online`: `OnlinePolicy` (the decision for one user or a stream of users at a stored λ*, through the
  model's compiled scoring plan; what `promo serve` answers with).
- `export`: `decide_budgets` (every budget: rows, manifest entries, checks), `decision_frame`,
  `manifest_entry`, `manifest`, `export_stored` (`promo export`).

No dagster here (domain code); docs/decisions.md documents the files and settings.
"""

from promo_assets.decisions.checks import CHECK_NAMES, CheckOutcome, champion_freshness, check_decisions
from promo_assets.decisions.exploration import (
    Constraints,
    Decision,
    DecisionError,
    Exploration,
    decide_with_exploration,
)
from promo_assets.decisions.export import (
    DecisionSet,
    ExportError,
    Population,
    decide_budgets,
    decision_frame,
    export_stored,
    manifest,
    manifest_entry,
)
from promo_assets.decisions.online import OnlinePolicy
from promo_assets.decisions.outbox import (
    DECISION_COLUMNS,
    OutboxError,
    read_decision_file,
    read_manifest,
    verify,
    write_outbox,
)

__all__ = [
    "CHECK_NAMES", "CheckOutcome", "Constraints", "DECISION_COLUMNS", "Decision", "DecisionError", "DecisionSet", "Exploration",
    "ExportError", "OutboxError", "Population", "champion_freshness", "check_decisions", "decide_budgets", "decide_with_exploration",
    "decision_frame", "export_stored", "manifest",
    "manifest_entry", "read_decision_file", "read_manifest", "verify", "write_outbox",
]
