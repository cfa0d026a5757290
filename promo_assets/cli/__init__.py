"""The command line `promo` (`main`: the commands and their options; `format`: how they print).

`python -m promo_assets.cli` runs it as the installed `promo` does. No dagster at import time: the
commands that run jobs import it when they run.
"""
