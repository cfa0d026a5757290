"""The SQL of promo_assets: one file per statement family, blocks headed `-- name: <statement>`.

This folder stays at the top of the repository and ships inside the package as `promo_assets.sql`
(setup.py maps it); `promo_assets.store.warehouse` reads the files with importlib.resources."""
