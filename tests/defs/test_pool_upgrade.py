"""An instance of the previous version, whose `warehouse` pool Dagster set to the then default limit
of 1, gets the current limit when a run starts (defs.recovery.settle_warehouse_pool, called by the
warehouse resource), and a run's warehouse step then claims a slot as usual."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import dagster as dg
import yaml

from promo_assets.defs.common import WAREHOUSE_POOL
from promo_assets.defs.resources import WarehouseResource

REPO = Path(__file__).resolve().parents[2]


@dg.asset(pool=WAREHOUSE_POOL)
def _touches_warehouse(warehouse: WarehouseResource) -> None:
    with warehouse.connect() as con:
        con.execute("select 1")


def test_a_pool_set_at_the_previous_limit_is_raised_when_a_run_starts(promo_env):
    home = promo_env["dagster_home"]
    current = yaml.safe_load((REPO / "dagster_home" / "dagster.yaml").read_text())["concurrency"]["pools"]["default_limit"]
    text = (home / "dagster.yaml").read_text()
    previous, n = re.subn(r"(\n    default_limit:) \d+", r"\1 1", text)
    assert n == 1 and current != 1
    (home / "dagster.yaml").write_text(previous)
    with dg.DagsterInstance.get() as old:  # what the previous version left: the default limit 1, set by Dagster
        assert old.event_log_storage.initialize_concurrency_limit_to_default(WAREHOUSE_POOL)
        info = old.event_log_storage.get_concurrency_info(WAREHOUSE_POOL)
        assert (info.slot_count, info.using_default_limit) == (1, True)
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    with dg.DagsterInstance.get() as instance:
        result = dg.materialize([_touches_warehouse], instance=instance,
                                resources={"warehouse": WarehouseResource(path=str(promo_env["warehouse"]))})
        assert result.success
        info = instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL)
        assert (info.slot_count, info.using_default_limit) == (current, False)
        assert not info.claimed_slots
