"""The tests' and benchmarks' harness (not part of the installed package): `devserver` starts
`dagster dev` and runs `promo` in a throw-away deployment; `pgserver` a throw-away PostgreSQL server."""
