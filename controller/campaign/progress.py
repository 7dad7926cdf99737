"""The progress bar a campaign shows while the solo profile and each round's chains run."""

from __future__ import annotations


def progress_bar(enabled: bool, total: int, desc: str):
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="sample", disable=not enabled, dynamic_ncols=True,
                smoothing=0.1, mininterval=0.5)
