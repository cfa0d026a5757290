"""The warehouse behind named functions: every read and write the Dagster assets and `promo` make,
one module per domain (`frames`: events, propensity, training frame, outcome predictions; `models`:
the model registry, skips, coefficients, λ*, evaluations and the leaderboard's rows; `graph`: the
customer–merchant graph and the joint allocation; `decisions`: the champion and the decisions;
`runs`: the runs `promo report` shows).

Each function takes an open DuckDB connection (the caller owns the connection and the transaction:
`warehouse.connect` / `warehouse.transaction`), runs the named statements of the top-level `sql/`
folder (`promo_assets.store.warehouse.sql(family, name)`) with bound parameters, and returns plain values
or data frames. The Dagster definitions (`promo_assets.defs`) and the CLI call these functions and
never compose or execute a statement themselves (tests/unit/test_store_boundary.py). Domain code: never imports dagster.
"""
