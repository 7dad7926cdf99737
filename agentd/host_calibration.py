"""Which calibration the host backend runs with: state_dir/calibration.json as written by
`mimesys-agent calibrate`, or the one `calibrate` has just measured (`use`), so the solo
profile it records is paced by it wherever that was written. A broken file is ignored with
one warning per distinct error, not one per read."""

from __future__ import annotations

import logging
from pathlib import Path

from mimesys.calibration import read as read_calibration
from mimesys.errors import ValidationError

log = logging.getLogger(__name__)


class HostCalibration:
    def __init__(self, state_dir: Path | None):
        self.state_dir = state_dir
        self._doc: dict | None = None      # use's, over the state's file
        self._warned = ""

    def use(self, doc: dict) -> None:
        self._doc = doc

    def current(self) -> dict:
        """The calibration in use; {} when there is none."""
        if self._doc is not None:
            return self._doc
        if self.state_dir is None:
            return {}
        path = Path(self.state_dir) / "calibration.json"
        if not path.exists():
            return {}
        try:
            return read_calibration(path)
        except ValidationError as e:
            if self._warned != str(e):
                log.warning("ignoring calibration: %s", e)
                self._warned = str(e)
            return {}
