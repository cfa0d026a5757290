"""Why CMNN(CLU) does not beat CMNN(ReLU) on `coman_spatiotemporal`: the scale of the
monotone layers' pre-activations against CLU's curvature scale.

For each activation (relu, elu, clu) `cmnn` is built (lr ~ 0: the initial parameters) and trained
(the benchmark's settings) on one seed's training frame; for the holdout users at the campaign's K
levels the script prints the first monotone layer's pre-activations z (std, median |z|), the range
of z over the K levels per user and unit (median, p90: how far the incentive attributes move a unit),
the share of (user, unit) whose range crosses 0 (where ReLU bends), the same for the second layer, and
CLU's slope ratio CLU'(z_max) / CLU'(z_min) over that range (1 = linear: CLU bends by curvature
1 / (2 (z^2 + 1)^{3/2}), i.e. on a scale of |z| ~ 1).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/coman_clu_scale.py --seed 100
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from promo_assets.simulation import REFERENCE_START  # noqa: E402


def layer_stats(net, x_num, x_cat) -> dict:
    import torch

    def clu_slope(z):
        return (1 + z / torch.sqrt(z * z + 1)) / 2

    with torch.no_grad():
        rep = net.representation(x_num, x_cat)
        attrs = (net.levels / net.scale)[None].expand(x_num.shape[0], -1, -1)
        first, out, x = net.stack.hidden[0], {}, None
        a = attrs.shape[-1]
        for i, layer in enumerate(net.stack.hidden):
            w = layer.signed_weight()
            z = attrs @ w[:a] + (rep @ w[a:])[:, None, :] + layer.bias if layer is first else x @ w + layer.bias
            lo, hi = z.amin(1), z.amax(1)
            out[f"layer{i + 1}"] = {
                "z_std": round(float(z.std()), 3), "z_abs_median": round(float(z.abs().median()), 3),
                "level_range_median": round(float((hi - lo).median()), 3),
                "level_range_p90": round(float((hi - lo).quantile(0.9)), 3),
                "share_crossing_0": round(float(((hi > 0) & (lo < 0)).float().mean()), 3),
                "clu_slope_ratio_median": round(float((clu_slope(hi) / clu_slope(lo)).median()), 3)}
            x = layer.activate(z)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--days", type=int, default=8)
    ap.add_argument("--users", type=int, default=2000)
    ap.add_argument("--max-epochs", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=512)
    args = ap.parse_args()
    from _results import Recorder

    rec = Recorder("coman_clu_scale")
    import torch
    from _model_frames import load_training_frame, train_model

    from promo_assets.simulation import SimulationRequest, simulate

    torch.set_num_threads(1)
    result = {"args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="coman-clu-") as tmp:
        os.environ["PROMO_ARTIFACTS_DIR"] = str(Path(tmp) / "artifacts")
        request = SimulationRequest(f"clu-{args.seed}", Path(tmp) / "landing", days=args.days, users=args.users,
                                    seed=args.seed, start=REFERENCE_START)
        s = simulate("coman_spatiotemporal", request)
        frame, config, numeric, categorical = load_training_frame(s.campaign_dir)
        holdout = frame[frame["split"] == "holdout"].reset_index(drop=True)
        for act in ("relu", "elu", "clu"):
            for label, kw in (("init", {"max_epochs": 1, "lr": 1e-12}), ("trained", {"max_epochs": args.max_epochs})):
                f = train_model("cmnn", frame, config, numeric, categorical, seed=args.seed, activation=act,
                                batch_size=args.batch_size, **kw)
                x_num, x_cat = (torch.from_numpy(a) for a in f.encoder.transform(holdout))
                result[f"{act} {label}"] = layer_stats(f.module, x_num, x_cat)
    print(json.dumps(result, indent=1))
    rec.write(result, headline={f"{k}, layer {i}: {what}": v[f"layer{i}"][key]
                               for k, v in result.items() if k.endswith("trained") for i in (1, 2)
                               for what, key in (("median level range of z", "level_range_median"),
                                                 ("share of ranges crossing 0", "share_crossing_0"))})


if __name__ == "__main__":
    main()
