"""The leaderboard for people: a compact table (what a person reads first) and the full table, each
as typed columns with a description, numbers rounded; no dagster here (domain code).

`compact_boards` gives one table per budget with seven columns: rank, model, the headline figure (the
figure the board is ranked by, with its interval where it has one), spend ratio, gain over the
cost-matched random reference, the champion mark, a short note; narrow enough for the Dagster UI's
metadata pane (about 510 px at a 1600 px wide window). `not_evaluated` lists the models without an
evaluation with the reason (those off by default share one row). `full_board` is every column of
`report.leaderboard` with its description. `board_metadata` is what the leaderboard asset shows (these
tables, the Markdown board with its notes, the plots), `segment_metadata` a model's segment
evaluation, as plain values (promo_assets.core.display) the Dagster wiring turns into metadata.
"""

from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

import pandas as pd

from promo_assets.core.display import Column, Markdown, Table, md_table, png_markdown, rows_table
from promo_assets.evaluation.board import board_notes, board_plots
from promo_assets.evaluation.report import (
    RANDOM_MODEL,
    TOO_SMALL,
    _latest_rows,
    _rank_basis,
    leaderboard,
    leaderboard_markdown,
)

# the description of every column of the full table (`report.leaderboard`)
COLUMN_HELP = {
    "campaign": "The campaign.",
    "budget": "Budget per capita the allocation was solved for.",
    "rank": "Rank within the budget at equal spend (1 = best), by the ranking figure named under the table.",
    "model": "The policy: a response model's allocation, or 'random' (the cost-matched random reference).",
    "version": "The model's content-addressed version (first 16 characters).",
    "% oracle": "Simulated campaigns: the true value at matched true spend as a share of the oracle's (the "
                "allocation with the true response and cost).",
    "matched value": "Simulated campaigns: true value per user of the allocation re-solved to spend exactly the budget in truth.",
    "spend ratio": "What the allocation as made spends over the budget (true cost; 'EOM' where only the estimate exists).",
    "DR Q": "Doubly robust value per user at DR cost = budget (equal spend, no truth needed).",
    "DR value": "Doubly robust value per user of the allocation as made (at its own spend).",
    "DR 95% CI": "95% interval of the DR value (influence-function normal interval).",
    "DR cost": "Doubly robust cost per user of the allocation as made.",
    "Q(v,c)": "Q(v, c): the EOM value at EOM cost = budget (end-to-end paper, Algorithm 1).",
    "EOM value": "Expected outcome metric: IPS-weighted value per user of the allocation as made.",
    "95% CI": "Bootstrap 95% interval of the EOM value.",
    "EOM cost": "IPS-weighted cost per user of the allocation as made.",
    "true value": "Simulated campaigns: true value per user of the allocation as made.",
    "true cost": "Simulated campaigns: true cost per user of the allocation as made.",
    "oracle": "Simulated campaigns: the oracle's true value per user at the budget.",
    "area ratio": "Area under the policy's EOM cost-response frontier over the random reference's (1 = random).",
    "area ratio (true)": "The same area ratio with the true response and cost.",
    "AUCC": "Area under the uplift cost curve (two-arm campaigns).",
    "LogLoss": "Log loss of the predicted response on the holdout events (binary response).",
    "AUC": "AUC of the predicted response on the holdout events (binary response).",
    "RPR": "Response prediction ratio: mean predicted over mean observed response (1 = calibrated).",
    "EPR": "Expense prediction ratio: mean predicted over mean observed cost (1 = calibrated).",
    "MLSS": "Mean level-slope squared error of the predicted response curves.",
    "note": "Why a figure is missing or what to watch (overspending, a too small holdout, a skip).",
}

_HEADLINE = {
    "pct_oracle": ("% oracle", "Simulated campaigns: the true value at matched true spend as a share of the "
                               "oracle's (the truth: no sampling interval)."),
    "dr_q_value": ("DR value [95% CI]", "Doubly robust value per user at equal spend (DR cost = budget), with the "
                                        "95% interval of the DR value of the allocation as made."),
    "q_value": ("Q(v,c) [95% CI]", "EOM value per user at EOM cost = budget, with the bootstrap 95% interval of the "
                                   "EOM value of the allocation as made."),
    "eom_value": ("EOM value [95% CI]", "EOM value per user of the allocation as made (NOT at equal spend), with its "
                                        "bootstrap 95% interval."),
}
_INTERVAL = {"dr_q_value": ("dr_ci_low", "dr_ci_high"), "q_value": ("eom_ci_low", "eom_ci_high"),
             "eom_value": ("eom_ci_low", "eom_ci_high")}
_LONG_FLOAT = re.compile(r"-?\d+\.\d{5,}")


def tidy(text) -> str:
    """A note for people: floats written with many digits rounded to 4 significant ones."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    return _LONG_FLOAT.sub(lambda m: f"{float(m.group()):.4g}", str(text))


def full_board(df: pd.DataFrame) -> tuple[list[Column], list[dict]]:
    """Every column of `report.leaderboard` (formatted figures), described; rank as an int."""
    board = leaderboard(df)
    columns = [Column(c, "int" if c == "rank" else "string", COLUMN_HELP.get(c, c)) for c in board.columns]
    records = [{c: (int(v) if v else None) if c == "rank" else tidy(v) for c, v in zip(board.columns, r)}
               for r in board.itertuples(index=False)]
    return columns, records


def _num(x) -> float | None:
    x = pd.to_numeric(pd.Series([x]), errors="coerce").iloc[0]
    return None if pd.isna(x) else float(x)


def short_note(note: str) -> str:
    """A compact table's note: the overspending flag as 'over x%', a too small holdout as 'too small',
    anything else as 'see note' (the full table and the report have the text)."""
    parts = []
    for part in filter(None, (p.strip() for p in str(note or "").split(";"))):
        m = re.match(r"OVERSPENDS the budget by ([\d.]+%)", part)
        parts.append(f"over {m.group(1)}" if m else "too small" if part.startswith(TOO_SMALL) else "see note")
    return ", ".join(dict.fromkeys(parts))


def compact_boards(df: pd.DataFrame, champion: Mapping[str, float] | Sequence[str] = (),
                   short: bool = True) -> list[tuple[float, list[Column], list[dict]]]:
    """The compact leaderboard of one campaign's policy_evaluation rows, one table per budget:
    [(budget, columns, records)], seven columns each (rank, model, the headline figure with its
    interval, spend ratio, gain over random, the champion mark, a note), short enough to be read in a
    narrow pane (`short`: notes as short flags, see `short_note`).

    `champion`: the members of the deployed champion (marked), with their weights when it is a blend.
    """
    d = _latest_rows(df)
    basis = next(iter(_rank_basis(d).values()), "eom_value") if len(d) else "eom_value"
    board = leaderboard(df)
    title, help_ = _HEADLINE[basis]
    columns = [
        Column("rank", "int", COLUMN_HELP["rank"]),
        Column("model", "string", COLUMN_HELP["model"]),
        Column(title, "string", help_),
        Column("spend", "float", "Spend ratio: what the allocation as made spends over the budget (the true cost on "
                                 "simulated campaigns, else the EOM estimate)."),
        Column("gain", "string", "Gain of the headline figure over the cost-matched random reference ('random') at "
                                 "the same budget: in points of % oracle, else relative (%)."),
        Column("★", "string", "The deployed champion (★); for a blend, each member's weight in it (★.64: 0.64)."),
        Column("note", "string", "What to watch: 'over x%' (spends more than the budget in truth as made), 'too "
                                 "small' (too few holdout users), 'see note' (the full table's note)."),
    ]
    d = d.assign(_b=d["budget_per_capita"].astype(float))
    random = {b: _num(r[basis]) for b, r in d[d["model"] == RANDOM_MODEL].set_index("_b").iterrows()}
    by_key = {(float(r["budget_per_capita"]), r["model"]): r for _, r in d.iterrows()}
    tables: dict[float, list[dict]] = {}
    for _, row in board.iterrows():
        b = float(row["budget"])
        src = by_key.get((b, row["model"]))
        value = None if src is None else _num(src[basis])
        if value is None:
            head = ""
        elif basis == "pct_oracle":
            head = f"{100 * value:.1f}%" if row.get("% oracle", "") else ""
        else:
            lo, hi = (_num(src[c]) for c in _INTERVAL[basis])
            head = f"{value:.3f}" + ("" if lo is None or hi is None else
                                     f" ±{(hi - lo) / 2:.3f}" if short else f" [{lo:.3f}, {hi:.3f}]")
        ref = random.get(b)
        gain = ""
        if row["model"] != RANDOM_MODEL and value is not None and ref is not None:
            if basis == "pct_oracle":
                gain = f"{100 * (value - ref):+.1f}" + ("" if short else " pts")
            elif ref > 0:
                gain = f"{100 * (value / ref - 1):+.1f}%"
            else:
                gain = f"{value - ref:+.3f}"
        mark = ""
        if row["model"] in champion:
            weight = champion.get(row["model"]) if isinstance(champion, Mapping) else None
            mark = "★" if len(champion) == 1 or weight is None else (f"★ {weight:.2f}" if not short else
                                                                         f"★{weight:.2f}".replace("★0.", "★."))
        ratio = _num(str(row.get("spend ratio", "")).split(" ")[0])
        tables.setdefault(b, []).append({
            "rank": int(row["rank"]) if row.get("rank") else None, "model": row["model"], title: head,
            "spend": None if ratio is None else round(ratio, 3), "gain": gain, "★": mark,
            "note": short_note(row.get("note", "")) if short else tidy(row.get("note", ""))})
    return [(b, columns, records) for b, records in tables.items()]


def not_evaluated(others: Sequence[Mapping]) -> tuple[list[Column], list[dict]]:
    """The models a leaderboard lists without an evaluation, with the reason; those off by default
    or left out by campaign.yaml `models:` share one row."""
    columns = [Column("model", "string", "The model (or, for the models not trained, how many)."),
               Column("status", "string", "skipped (does not apply or not trained for the campaign), stale (its "
                                          "evaluation is of an earlier training frame) or missing (failed or not run)."),
               Column("reason", "string", "Why.")]
    quiet = [o for o in others if _by_design(o.get("reason"))]
    records = [{"model": o["model"], "status": str(o.get("status")), "reason": tidy(o.get("reason"))}
               for o in others if o not in quiet]
    if quiet:
        records.append({"model": f"{len(quiet)} more", "status": "skipped",
                        "reason": "not trained for this campaign (off by default or left out by campaign.yaml "
                                  "models:): " + ", ".join(sorted(o["model"] for o in quiet))})
    return columns, records


def _by_design(reason) -> bool:
    text = str(reason or "")
    return text.startswith(("off by default", "not listed in campaign.yaml", "excluded by campaign.yaml"))


def board_tables(board: pd.DataFrame, entries: list[dict], champion: dict[str, float]) -> dict[str, Table]:
    """The compact leaderboard (one table per budget), the models not evaluated with the reason and
    the full leaderboard, in that order."""
    others = [{k: e[k] for k in ("model", "status", "reason")} for e in entries if e["status"] != "evaluated"]
    out = {f"leaderboard at budget {b:g}": Table(columns, records) for b, columns, records in compact_boards(board, champion)}
    out["not_evaluated"] = Table(*not_evaluated(others))
    out["leaderboard_full"] = Table(*full_board(board))
    return out


def board_metadata(board: pd.DataFrame, specs: dict, ev, config, campaign: str, entries: list[dict], checks: list,
                   champion: dict[str, float]) -> dict:
    """The leaderboard asset's page: its tables, its Markdown with the notes under it, its plots, the
    data checks it saw and the evaluations it assembled."""
    frontier_png, levels_png = board_plots(board, specs, ev, config, campaign)
    return {
        **board_tables(board, entries, champion),
        "leaderboard_markdown": Markdown(leaderboard_markdown(board) + board_notes(checks, entries)),
        "frontier_plot": png_markdown(frontier_png, "Cost–response frontier (EOM on holdout; truth where simulated)"),
        "response_per_level_plot": png_markdown(levels_png, "Average response per level: models vs truth"),
        "data_checks": md_table([{"check": c.name, "passed": c.passed, "severity": c.severity, "message": c.message}
                                 for c in checks]),
        "models": md_table([{"model": e["model"], "version": e["model_version"], "evaluation_run": e["evaluation_run_id"]}
                            for e in entries if e["status"] == "evaluated"]),
        "holdout_events": ev.n, "ground_truth": ev.true_values is not None, **ev.versions,
    }


def segment_metadata(segments) -> dict:
    """The segment table (the rows shown) and the per-segment plot of a model's policy_evaluation
    (`evaluation.inputs.segment_outputs`); nothing without a plot."""
    if segments.plot is None:
        return {}
    return {"segment_evaluation": rows_table(segments.shown),
            "segment_plot": png_markdown(segments.plot, "Mean response per level by segment: predicted vs true")}
