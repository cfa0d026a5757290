"""A `constraints` group on a column the loaded events do not have, met by the assets (a run started
from the UI, where `promo run`'s check before the run does not apply): the evaluation and the
decisions fail naming the key, before any query on the column and before anything is decided."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from promo_assets.defs.common import LandingResource, WarehouseResource, domain_errors
from promo_assets.ingestion import ingest_events_day, load_config
from promo_assets.simulation import SimulationRequest, simulate
from promo_assets.store import warehouse

GROUP = "constraints:\n  groups:\n    big_city: {feature: no_such_column, equals: x, budget_per_capita: 0.5}\n"


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-decisions-group-cap-on-a-column-not-loaded"])
def test_decisions_refuse_a_group_cap_on_a_column_the_loaded_events_lack(tmp_path, case):
    from promo_assets.decisions import DecisionError
    from promo_assets.decisions.plans import constraints_for_users

    simulate("demo", SimulationRequest("c1", tmp_path / "landing", 2, 150, 1, start=dt.date(2026, 1, 1)))
    folder = tmp_path / "landing" / "c1"
    with warehouse.connect(tmp_path / "w.duckdb") as con:
        for path in sorted((folder / "events").glob("*.parquet")):
            ingest_events_day(con, load_config(tmp_path / "landing", "c1"), dt.date.fromisoformat(path.stem), path)
    (folder / "campaign.yaml").write_text((folder / "campaign.yaml").read_text() + GROUP)
    config = load_config(tmp_path / "landing", "c1")
    with pytest.raises(DecisionError) as err, WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        constraints_for_users(con, LandingResource(root=str(tmp_path / "landing")).path, "c1", config, ["u0000001"])
    with pytest.raises(dg.Failure) as failure, domain_errors():  # the asset's failure: the same message
        raise err.value
    message = str(err.value)
    assert "'constraints.groups.big_city.feature' = 'no_such_column'" in message
    assert "the loaded events of campaign 'c1' have no such feature column" in message and "city" in message
    assert "Binder" not in message and str(failure.value) == message
