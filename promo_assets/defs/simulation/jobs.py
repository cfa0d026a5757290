"""A job that writes a simulated campaign into the landing folder (the demo, from the UI)."""


import dagster as dg

from promo_assets.defs.common import LandingResource, campaign_partitions
from promo_assets.ingestion import discover_campaigns
from promo_assets.simulation import SimulationRequest, simulate


class SimulateConfig(dg.Config):
    preset: str = "demo"
    campaign: str = "demo"
    days: int = 14
    users: int = 5000
    seed: int = 0
    start: str | None = None  # first day YYYY-MM-DD (default: today - days); part of the campaign with the seed
    only_if_empty: bool = True
    logging: str = "rct"


@dg.op(description="Simulate a campaign (default: the built-in demo) into the landing folder and register its partition.")
def simulate_campaign(context: dg.OpExecutionContext, config: SimulateConfig, landing: LandingResource):

    existing = discover_campaigns(landing.path)
    if config.only_if_empty and existing:
        context.log.info(f"landing folder {landing.path} already holds {existing}; nothing simulated (only_if_empty)")
        return
    options = {"logging": config.logging} if config.preset == "demo" else {}
    request = SimulationRequest(config.campaign, landing.path, config.days, config.users, config.seed, config.start)
    summary = simulate(config.preset, request, **options)
    context.instance.add_dynamic_partitions(campaign_partitions.name, [config.campaign])
    context.log.info(f"wrote campaign '{config.campaign}' ({config.preset}) to {landing.path / config.campaign}: {summary}")


@dg.job(description="Write the built-in demo campaign into an empty landing folder; the landing sensor "
        "then ingests it. Change preset/campaign/days/users/seed/start in the launchpad config.")
def simulate_demo_job():
    simulate_campaign()
