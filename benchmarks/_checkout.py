"""Run `python -m promo_assets.cli ...` of another checkout with this Python environment.

The environment's editable install of promo_assets maps the package's SQL (`promo_assets.sql`, the
top-level sql/ folder of the checkout it was installed from) with an import hook: a checkout put
first on PYTHONPATH would still read the installed checkout's SQL. `cli_command(code, *args)` boots
the CLI with `promo_assets.sql` bound to `code`'s own sql/ folder first (when it has one at the top;
a checkout with promo_assets/sql inside the package needs nothing), so old code runs its own SQL.
"""

from __future__ import annotations

import sys
from pathlib import Path

_BOOT = """
import importlib.util, runpy, sys
code = sys.argv.pop(1)
sys.path.insert(0, code)
import promo_assets
from pathlib import Path
top = Path(code) / "sql" / "__init__.py"
if top.exists() and not (Path(code) / "promo_assets" / "sql").exists():
    spec = importlib.util.spec_from_file_location("promo_assets.sql", top, submodule_search_locations=[str(top.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["promo_assets.sql"] = module
    spec.loader.exec_module(module)
sys.argv[0] = "promo"
runpy.run_module("promo_assets.cli", run_name="__main__", alter_sys=True)
"""


def cli_command(code: Path, *args: str) -> list[str]:
    """The command line running `promo <args>` with the code of checkout `code`."""
    return [sys.executable, "-c", _BOOT, str(code), *args]
