"""The campaign report as one self-contained HTML file: plotly.js is inlined (no network access is
needed to open it), every figure is an interactive Plotly chart, every table is plain HTML."""

from __future__ import annotations

import datetime as dt
import html
import json
import math

import numpy as np
import pandas as pd

from promo_assets.evaluation.board_view import compact_boards, full_board, not_evaluated, tidy
from promo_assets.evaluation.champion import headline_text, stored_headline
from promo_assets.report.data import ReportData

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 0 24px 48px; color: #1d2330; line-height: 1.45; }
h1 { margin-bottom: 0; } .sub { color: #5b6474; margin-top: 4px; }
h2 { border-bottom: 1px solid #d8dde6; padding-bottom: 4px; margin-top: 36px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 14px; }
th, td { border: 1px solid #d8dde6; padding: 4px 8px; text-align: right; vertical-align: top; }
th { background: #f2f4f8; } td.l, th.l { text-align: left; }
th[title] { text-decoration: underline dotted; cursor: help; }
.champ { background: #fff6d6; } .note { color: #5b6474; font-size: 13px; }
.headline { font-size: 18px; background: #eef6ee; border-left: 4px solid #3c8d40; padding: 8px 12px; }
dl.help dt { font-weight: 600; } dl.help dd { margin: 0 0 6px 16px; color: #3b4352; }
.plot { min-height: 420px; }
.stopped { font-size: 16px; background: #fdecea; border-left: 4px solid #c62828; padding: 8px 12px; }
pre.status { background: #f6f7f9; padding: 8px 12px; white-space: pre-wrap; font-size: 13px; }
"""


def _e(x) -> str:
    return html.escape("" if x is None else str(x))


def _num(x, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
        return ""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return f"{int(x):,}"
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.{digits}g}"
    return str(x)


def table(columns: list[str], rows: list[dict], help_: dict | None = None, left=(), highlight=None) -> str:
    """An HTML table; `help_`: column -> description (a tooltip on the header)."""
    help_ = help_ or {}
    head = "".join(f'<th class="{"l" if c in left else ""}"' + (f' title="{_e(help_[c])}"' if c in help_ else "")
                   + f">{_e(c)}</th>" for c in columns)
    body = []
    for r in rows:
        cls = ' class="champ"' if highlight and highlight(r) else ""
        cells = "".join(f'<td class="{"l" if c in left else ""}">{_e(_num(r.get(c)))}</td>' for c in columns)
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


class _Figures:
    """The report's Plotly figures, as divs; the count is what the browser test expects rendered."""

    def __init__(self):
        self.n = 0

    def div(self, fig, name: str) -> str:
        self.n += 1
        fig.update_layout(template="plotly_white", margin=dict(l=60, r=20, t=50, b=50), height=440)
        return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot-{name}",
                           config={"displaylogo": False, "responsive": True})


def render(data: ReportData, generated: dt.datetime | None = None) -> str:
    """The report's HTML (one file, plotly.js inlined)."""
    from plotly.offline import get_plotlyjs

    figs = _Figures()
    generated = generated or dt.datetime.now(dt.timezone.utc)
    sections = [_status(data), _champion(data, figs), _leaderboard(data), _frontier(data, figs), _per_level(data, figs),
                _segments(data, figs), _decisions(data, figs), _pacing(data, figs), _outcomes(data, figs), _notes(data)]
    started = f", started {data.board_started:%Y-%m-%d %H:%M}" if data.board_started is not None else ""
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(data.campaign)}: campaign report</title><style>{_CSS}</style>"
            f"<script type=\"text/javascript\">{get_plotlyjs()}</script></head><body>"
            f"<h1>Campaign {_e(data.campaign)}</h1>"
            f"<p class=\"sub\">Leaderboard run {_e(data.board_run)}{_e(started)} · budgets per capita "
            f"{_e(', '.join(f'{b:g}' for b in data.budgets))} · levels {_e(', '.join(data.labels))} · "
            f"report written {generated:%Y-%m-%d %H:%M} UTC · <span id=\"plot-count\" data-plots=\"{figs.n}\">"
            f"{figs.n} plots</span></p>"
            + "".join(s for s in sections if s) + "</body></html>")


def _status(data: ReportData) -> str:
    """The status block `promo report` opens with (promo_assets.monitoring.status, judged when the report was
    written), a stopped export first in red."""
    if not data.status:
        return ""
    stopped = (f'<p class="stopped" id="export-stopped">{_e(data.export_stopped)}</p>'
               if data.export_stopped else "")
    return ("<h2>Status</h2>" + stopped + '<pre class="status">'
            + _e("\n".join(line.strip() for line in data.status)) + "</pre>")


def _members(champion: dict) -> tuple[list[str], list[float]]:
    members = json.loads(champion.get("champion_members") or "{}")
    return list(members.get("members", [])), [float(w) for w in members.get("weights", [])]


def _champion(data: ReportData, figs: _Figures) -> str:
    import plotly.graph_objects as go

    c = data.champion
    if c is None:
        return "<h2>Champion</h2><p>No champion yet: the champion asset has not run for this campaign.</p>"
    names, weights = _members(c)
    parts = [f"<h2>Champion: {_e(c['champion'])}</h2>"]
    head = headline_text(c["champion"], data.budgets, stored_headline(c), c.get("champion_confidence"))
    by = c.get("champion_decided_by")
    if by is not None and not (isinstance(by, float) and math.isnan(by)):
        parts.append(f"<p>Chosen on: {_e(by)}</p>")
    parts.insert(1, f'<p class="headline">{_e(head)}</p>')
    parts.append(f'<p>Why: {_e(c["champion_reason"])}</p>')
    if len(names) > 1:
        parts.append("<p>Blend of " + ", ".join(f"{_e(n)} ({w:.2f})" for n, w in zip(names, weights)) + ".</p>")
    pct = c.get("pct_oracle")
    if pct is not None and not (isinstance(pct, float) and math.isnan(pct)):
        parts.append(f"<p>Truth (simulated campaign): the champion reaches {100 * pct:.2f}% of the oracle; the best "
                     f"candidate, {_e(c.get('best_candidate'))}, {100 * c.get('best_pct_oracle'):.2f}%.</p>")
    ev = data.evidence
    if ev is not None and not ev.empty:
        cand = ev[ev["evidence_kind"] == "candidate"]
        if not cand.empty:
            fig = go.Figure()
            for b, g in cand.groupby("budget_per_capita"):
                g = g.sort_values("value")
                fig.add_trace(go.Scatter(
                    x=g["value"], y=g["champion_candidate"], mode="markers", name=f"budget {b:g}",
                    error_x=dict(type="data", symmetric=False, array=(g["value_high"] - g["value"]).clip(lower=0),
                                 arrayminus=(g["value"] - g["value_low"]).clip(lower=0))))
            fig.update_layout(title="Evidence: every candidate's DR value per user at equal spend (with its interval)",
                              xaxis_title="DR value per user at DR cost = budget", yaxis_title="candidate")
            parts.append(figs.div(fig, "evidence"))
        cols = [x for x in ("evidence_kind", "champion_candidate", "champion_reference", "budget_per_capita", "value",
                            "value_low", "value_high", "champion_verdict", "pct_oracle") if x in ev.columns]
        parts.append("<details><summary>Every comparison of the evidence</summary>"
                     + table(cols, ev[cols].to_dict("records"), left={"evidence_kind", "champion_candidate",
                                                                       "champion_reference", "champion_verdict"})
                     + "</details>")
    return "".join(parts)


def _leaderboard(data: ReportData) -> str:
    members = dict(zip(*_members(data.champion))) if data.champion else {}
    parts = ["<h2>Leaderboard</h2>",
             "<p>Every policy at equal spend on the holdout days, one table per budget (hover a column's name for what "
             "it means). 'random' is the cost-matched random reference.</p>"]
    columns = []
    for b, columns, records in compact_boards(data.board, members, short=False):
        parts.append(f"<h3>Budget {b:g} per capita</h3>")
        parts.append(table([c.name for c in columns], records, {c.name: c.description for c in columns},
                           left={"model", "note", "★"}, highlight=lambda r: bool(r.get("★"))))
    parts.append("<dl class=\"help\">" + "".join(f"<dt>{_e(c.name)}</dt><dd>{_e(c.description)}</dd>" for c in columns)
                 + "</dl>")
    others = data.entries[data.entries["status"] != "evaluated"][["model", "status", "reason"]].to_dict("records")
    if others:
        ncols, nrecs = not_evaluated(others)
        parts.append("<h3>Not ranked</h3>" + table([c.name for c in ncols], nrecs, left={"model", "status", "reason"}))
    fcols, frecs = full_board(data.board)
    parts.append("<details><summary>The full leaderboard (every figure)</summary>"
                 + table([c.name for c in fcols], frecs, {c.name: c.description for c in fcols},
                         left={"campaign", "model", "version", "note"})
                 + "<dl class=\"help\">" + "".join(f"<dt>{_e(c.name)}</dt><dd>{_e(c.description)}</dd>" for c in fcols)
                 + "</dl></details>")
    return "".join(parts)


def _frontier(data: ReportData, figs: _Figures) -> str:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    curves = data.curves
    if curves is None or curves.empty:
        return "<h2>Cost–response frontier</h2><p>No curves: no model's holdout coefficients are stored.</p>"
    truth = bool(curves["true_value"].notna().any())
    fig = make_subplots(rows=1, cols=2 if truth else 1, subplot_titles=(
        ["EOM on the holdout RCT users", "truth (simulation)"] if truth else ["EOM on the holdout RCT users"]))
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
    models = list(dict.fromkeys(curves["model"]))
    for i, m in enumerate(models):
        style = dict(color="#555", dash="dash") if m == "random" else dict(color="#000", dash="dot") if m == "oracle" \
            else dict(color=palette[i % len(palette)])
        for col, kind in enumerate(["eom", "true"] if truth else ["eom"], start=1):
            d = curves[curves["model"] == m].dropna(subset=[f"{kind}_cost", f"{kind}_value"]).sort_values(f"{kind}_cost")
            if d.empty:
                continue
            fig.add_trace(go.Scatter(x=d[f"{kind}_cost"], y=d[f"{kind}_value"], mode="lines+markers", name=m,
                                     legendgroup=m, showlegend=col == 1, line=style, marker=dict(size=4)),
                          row=1, col=col)
    for b in data.budgets:
        fig.add_vline(x=b, line=dict(color="#aaa", dash="dash", width=1), annotation_text=f"budget {b:g}")
    fig.update_xaxes(title_text="cost per user")
    fig.update_yaxes(title_text="response per user")
    fig.update_layout(title="Cost–response frontier of every policy (each point: the allocation at one multiplier λ)")
    return ("<h2>Cost–response frontier</h2><p>Higher is better at the same cost; the dashed vertical lines are the "
            "configured budgets. 'random' is the cost-matched random reference, 'oracle' the allocation with the true "
            "response (simulated campaigns).</p>" + figs.div(fig, "frontier"))


def _per_level(data: ReportData, figs: _Figures) -> str:
    import plotly.graph_objects as go

    d = data.per_level
    if d is None or d.empty:
        return ""
    fig = go.Figure()
    for m, g in d.groupby("model", sort=False):
        style = dict(color="#000", dash="dot") if m == "truth" else dict(color="#777", dash="dash") if m == "observed" \
            else {}
        fig.add_trace(go.Scatter(x=g["label"], y=g["mean_response"], mode="lines+markers", name=m, line=style))
    fig.update_layout(title="Mean response per level on the holdout users: models, truth and observed",
                      xaxis_title="level", yaxis_title="mean response per user", xaxis_type="category")
    return ("<h2>Response per level</h2><p>Each model's mean predicted response per level over the holdout users, "
            "against the truth (simulated campaigns) and the mean observed response of the events logged at each "
            "level (randomized logging).</p>" + figs.div(fig, "per-level"))


def _segments(data: ReportData, figs: _Figures) -> str:
    import plotly.graph_objects as go

    s = data.segments
    if s is None or s.empty:
        return ""
    shown = s[s["budget_per_capita"].notna()]
    parts = ["<h2>Per segment</h2><p>campaign.yaml <code>segments</code>: each model's decision in truth against "
             "the oracle's, per segment (smallest budget), and the error of its predicted response curve.</p>"]
    if not shown.empty:
        b = shown["budget_per_capita"].min()
        g = shown[(shown["budget_per_capita"] == b) & (shown["segment_by"] != "all")]
        if not g.empty:
            fig = go.Figure()
            for m, gm in g.groupby("model", sort=False):
                share = gm["true_value"] / gm["oracle_value"].where(gm["oracle_value"] != 0)
                fig.add_trace(go.Bar(x=gm["segment_by"] + "=" + gm["segment_value"].astype(str), y=100 * share, name=m))
            fig.update_layout(title=f"True value as % of the oracle's per segment (budget {b:g})", barmode="group",
                              yaxis_title="% of the oracle", xaxis_title="segment")
            parts.append(figs.div(fig, "segments"))
    cols = [c for c in ("model", "segment_by", "segment_value", "budget_per_capita", "n_users", "curve_mae", "corr",
                        "true_value", "oracle_value") if c in s.columns]
    parts.append(table(cols, s[cols].to_dict("records"), left={"model", "segment_by", "segment_value"}))
    return "".join(parts)


def _decisions(data: ReportData, figs: _Figures) -> str:
    import plotly.graph_objects as go

    d = data.decisions
    if d is None or d.empty:
        return "<h2>Decisions exported</h2><p>No decisions yet: the decisions asset has not run for this campaign.</p>"
    cols = ["budget_per_capita", "decision_date", "champion", "users", "exploration_share", "exploration_users",
            "expected_response_per_capita", "expected_cost_per_capita", "value_given_up_per_capita"]
    help_ = {"exploration_share": "Share of the users given a random level (the exploration that keeps the next days "
                                  "an RCT).",
             "value_given_up_per_capita": "Predicted response per user given up for the exploration."}
    title = ("<h2>Newest decisions (not exported: the export is stopped, see Status)</h2>" if data.export_stopped
             else "<h2>Decisions exported</h2>")
    parts = [title + "<p>The champion's decision for every user decided for, with the exploration "
             "share (users given a random level so that the next days stay a randomized experiment). Decided for: "
             + _e(d["decided_for"].iloc[0]) + "</p>", table(cols, d.to_dict("records"), help_, left={"champion", "decision_date"})]
    lv = data.decision_levels
    if lv is not None and not lv.empty:
        fig = go.Figure()
        for (b, policy), g in lv.groupby(["budget_per_capita", "policy"], sort=False):
            fig.add_trace(go.Bar(x=g["label"].astype(str), y=g["users"], name=f"budget {b:g}: {policy}"))
        fig.update_layout(title="Users per level in the exported decisions (champion vs exploration)", barmode="stack",
                          xaxis_title="level", yaxis_title="users", xaxis_type="category")
        parts.append(figs.div(fig, "decisions"))
    return "".join(parts)


PACING_HELP = {
    "day": "the paced decision day",
    "plan": "what the day should spend: the budget left over the days left",
    "predicted spend": "the champion's predicted spend at the day's λ for every user decided for",
    "realized spend": "what the day's events reported (empty: not loaded yet)",
    "spend ratio": "realized over predicted spend of the days back before it: the correction applied to the plan",
    "budget left": "the total minus the spend so far (realized, else planned)",
    "λ": "the day's λ: a user gets the level maximizing response − λ × cost",
    "controller": "ratio (λ meets the plan corrected by the spend ratio) or dual (yesterday's λ scaled by its error)",
}


def _pacing(data: ReportData, figs: _Figures) -> str:
    import plotly.graph_objects as go

    head = "<h2>Spend per day</h2>"
    if not data.period_budget:
        return head + ("<p>Pacing is not configured for this campaign (no <code>budget:</code> in campaign.yaml): "
                       "no spend per day to show.</p>")
    p = data.pacing
    if p is None or p.empty:
        return head + (f"<p>The decisions run shown ({_e(data.decisions_run or 'none')}) made no paced decision: its "
                       f"day is outside the period {_e(data.period_budget.get('start'))} .. "
                       f"{_e(data.period_budget.get('end'))}, or it ran before pacing was configured.</p>")
    last = p.iloc[-1]
    days = [str(pd.Timestamp(d).date()) for d in p["pacing_day"]]
    back = p["realized_spend"].notna()
    intro = (f"<p>Period {_e(pd.Timestamp(last['period_start']).date())} .. {_e(pd.Timestamp(last['period_end']).date())}, "
             f"total {_e(_num(float(last['period_total'])))}, controller <code>{_e(last['controller'])}</code>: "
             f"{len(p)} paced day(s) as decisions run {_e(data.decisions_run)} saw them, {int(back.sum())} with their "
             f"spend back; realized so far {_e(_num(float(p.loc[back, 'realized_spend'].sum())))}, budget left "
             f"{_e(_num(float(last['budget_left'])))} after the last day (its plan counted until it comes back).</p>")
    fig = go.Figure()
    fig.add_trace(go.Bar(x=days, y=p["plan"], name="plan", marker_color="#b8bfcc"))
    fig.add_trace(go.Bar(x=days, y=p["realized_spend"], name="realized spend", marker_color="#3c6fd1"))
    fig.add_trace(go.Scatter(x=days, y=p["predicted_spend"], mode="lines+markers", name="predicted spend (all decided for)",
                             line=dict(dash="dot", color="#8a5cc2")))
    fig.update_layout(title="Spend per day against the plan", barmode="group", xaxis_title="day", yaxis_title="spend",
                      xaxis_type="category")
    left = go.Figure()
    left.add_trace(go.Scatter(x=days, y=p["budget_left"], mode="lines+markers", name="budget left"))
    left.add_trace(go.Scatter(x=days, y=p["cumulative_spend"], mode="lines+markers", name="cumulative spend"))
    left.add_trace(go.Scatter(x=days, y=p["even_plan"], mode="lines", name="even plan (cumulative)",
                              line=dict(dash="dash", color="#888")))
    left.add_hline(y=float(last["period_total"]), line_color="black", line_width=1, annotation_text="total")
    left.update_layout(title="Budget left and cumulative spend (realized, else planned)", xaxis_title="day",
                       yaxis_title="spend", xaxis_type="category")
    rows = [{"day": d, "plan": r.plan, "predicted spend": r.predicted_spend,
             "realized spend": None if pd.isna(r.realized_spend) else r.realized_spend, "spend ratio": r.spend_ratio,
             "budget left": r.budget_left, "λ": r.lambda_, "controller": r.controller}
            for d, r in zip(days, p.itertuples())]
    return (head + intro + figs.div(fig, "pacing") + figs.div(left, "pacing-budget-left")
            + table(list(PACING_HELP), rows, PACING_HELP, left=("day", "controller")))


OUTCOME_HELP = {
    "day": "the decided day whose events came back",
    "status": "ok, or refused (why: table outcomes)",
    "events": "events joined to the day's decision",
    "compliance": "share of the decisions giving an incentive that the coupon system applied",
    "realized response": "response per event",
    "predicted response": "the champion's prediction for the same users and levels",
    "realized spend": "spend per event",
    "predicted spend": "the champion's predicted spend per event",
    "in manifest interval": "the realized response lies inside the manifest's interval",
    "effect": "the day's effect against random levels at equal spend, per user",
}


def _outcomes(data: ReportData, figs: _Figures) -> str:
    import plotly.graph_objects as go

    head = "<h2>What the deployed decisions did</h2>"
    o = data.outcomes
    if o is None or o.empty:
        return head + ("<p>No decided day has come back yet: once the events of a day the champion decided for are "
                       "loaded, the <code>outcomes</code> asset sets them against the decision.</p>")
    ok = o[o["status"] == "ok"].sort_values("decision_date")
    days = [str(pd.Timestamp(d).date()) for d in ok["decision_date"]]
    parts = [head]
    e = data.outcome_effect
    if e is not None and not e.empty:
        last = e.iloc[-1]
        parts.append(f"<p>So far the champion brought <b>{_e(f'{1000 * last.effect:+.1f}')}</b> responses per 1,000 "
                     f"users over random levels at the same spend, [{_e(f'{1000 * last.low:+.1f}')}, "
                     f"{_e(f'{1000 * last.high:+.1f}')}] ({data.monitoring_confidence:.0%} confidence sequence: valid "
                     f"however often it is read), over {int(last.days)} deployed day(s) and {int(last.events)} events; "
                     f"against the cheapest level {_e(f'{1000 * last.vs_cheapest:+.1f}')} "
                     f"[{_e(f'{1000 * last.vs_cheapest_low:+.1f}')}, {_e(f'{1000 * last.vs_cheapest_high:+.1f}')}].</p>")
        edays = [str(pd.Timestamp(d).date()) for d in e["decision_date"]]
        fig = go.Figure()
        fig.add_trace(go.Scatter(x=edays + edays[::-1], y=list(e["high"]) + list(e["low"])[::-1], fill="toself",
                                 fillcolor="rgba(60,111,209,0.2)", line=dict(width=0), name="confidence sequence"))
        fig.add_trace(go.Scatter(x=edays, y=e["effect"], mode="lines+markers", name="effect so far",
                                 line=dict(color="#3c6fd1")))
        fig.add_trace(go.Scatter(x=edays, y=e["dm_effect"], mode="lines", name="difference of means (not at equal spend)",
                                 line=dict(dash="dot", color="#888")))
        fig.add_hline(y=0, line_color="black", line_width=1)
        fig.update_layout(title="The champion's effect against random levels at equal spend, per user", xaxis_title="as of day",
                          yaxis_title="response per user", xaxis_type="category")
        parts.append(figs.div(fig, "outcome-effect"))
    if len(ok):
        fig = go.Figure()
        for col, name, dash in (("realized_response", "realized response", None),
                                ("predicted_response", "predicted response", "dash"),
                                ("realized_cost", "realized spend", None), ("predicted_cost", "predicted spend", "dash")):
            fig.add_trace(go.Scatter(x=days, y=ok[col], mode="lines+markers", name=name, line=dict(dash=dash)))
        fig.update_layout(title="Realized against predicted, per event, by decided day", xaxis_title="day",
                          yaxis_title="per event", xaxis_type="category")
        parts.append(figs.div(fig, "outcome-realized"))
    rows = [{"day": str(pd.Timestamp(r.decision_date).date()), "status": r.status, "events": r.joined,
             "compliance": r.compliance, "realized response": r.realized_response,
             "predicted response": r.predicted_response, "realized spend": r.realized_cost,
             "predicted spend": r.predicted_cost,
             "in manifest interval": "-" if pd.isna(r.within_manifest) else ("yes" if r.within_manifest else "no"),
             "effect": r.effect} for r in o.sort_values("decision_date").itertuples()]
    parts.append(table(list(OUTCOME_HELP), rows, OUTCOME_HELP, left=("day", "status", "in manifest interval")))
    c = data.monitoring_checks
    if c is not None and not c.empty:
        failing = c[~c["passed"]]
        parts.append("<p>Checks failing: " + ("none" if failing.empty else "; ".join(
            f"<b>{_e(r.check_name)}</b> ({_e(r.severity)}, reaction {_e(r.reaction)}): {_e(r.message)}"
            for r in failing.itertuples())) + "</p>")
    return "".join(parts)


def _notes(data: ReportData) -> str:
    lines = [f"data check {n} failed ({s}): {m}" for n, s, m in data.checks]
    lines += data.notes
    if not lines:
        return ""
    return "<h2>Notes</h2><ul>" + "".join(f"<li>{_e(tidy(x))}</li>" for x in lines) + "</ul>"
