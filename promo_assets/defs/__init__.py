"""The Dagster definitions of the code location, one folder per domain (`promo_assets/defs/<domain>/`
wires the domain package `promo_assets/<domain>/` into assets; the logic stays in the domain package):

- `ingestion/assets.py`    rct_events, payment_edges: a campaign's landing day files → the warehouse
- `campaign/assets.py`     propensity → training_frame → outcome_model, shared by every model's chain
- `models/assets.py`       one chain per registered model: <model>/model → response_coefficients →
                           budget_dual → allocation → policy_evaluation
- `graph/assets.py`        merchant_events, customer_merchant_graph, the GNN chain's merchant
                           coefficients and joint allocation
- `evaluation/leaderboard.py`  the campaign's leaderboard over every model's evaluation
- `decisions/assets.py`    champion → decisions → outbox, and the campaign report
- `automation/`            jobs.py: the jobs, the daily schedule and the sensors; conditions.py: the
                           assets' automation conditions
- `simulation/jobs.py`     the job that writes the demo campaign into the landing folder

Shared wiring lives here: `resources.py` (warehouse, landing folder, artefact store, Dask),
`common.py` (partitions, the warehouse pool, metadata helpers), `recovery.py` (runs whose process
died). `promo_assets/definitions.py` gathers them into the one `Definitions`. No module here composes
SQL: the warehouse is reached through `promo_assets.store`.
"""
