"""A campaign's dataset with every sample, the spread filter off: each sample is the mean over
its repetitions however much they differed (`mimesys dataset build` keeps only the stable ones).
Used for host B of the transfer bench, where the CPU quota makes repetitions of one composition
differ more than the default filter allows (it dropped 76 % of B's round 0).

    python bench/dataset_unfiltered.py CAMPAIGN -o DATASET.h5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.campaign.campaign import Campaign  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", type=Path)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()
    camp = Campaign.open(args.campaign, create=False)
    filtered = camp.samples()
    camp.samples = lambda upto_round=None, filtered=True, _f=camp.samples: _f(upto_round, filtered=False)
    ds = camp.dataset()
    ds.provenance = {**ds.provenance, "spread_filter": "off (bench/dataset_unfiltered.py)",
                     "stable_samples": int(len(filtered["round"]))}
    ds.write(args.output)
    print(f"{ds.S} samples ({len(filtered['round'])} of them stable) -> {args.output}")


if __name__ == "__main__":
    main()
