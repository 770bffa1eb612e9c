"""What the GPU check scripts share: one line per check (ok/FAIL with its
figures), the results as JSON, the count of passed checks last, and running
the `exactly` binary with its error shown when it fails."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


class Report:
    def __init__(self) -> None:
        self.results: list[dict] = []
        self.failures = 0

    def record(self, name: str, ok: bool, **info) -> None:
        ok = bool(ok)
        self.results.append({"check": name, "ok": ok, **info})
        print(f"{'ok  ' if ok else 'FAIL'} {name} " + " ".join(f"{k}={v}" for k, v in info.items()), flush=True)
        self.failures += 0 if ok else 1

    def finish(self, what: str, json_path: str | None, extra: list[dict] | None = None) -> int:
        """Writes the JSON, prints "N/M <what> passed" last; the exit status."""
        if json_path:
            Path(json_path).write_text(json.dumps(self.results + (extra or []), indent=1))
        print(f"{len(self.results) - self.failures}/{len(self.results)} {what} passed")
        return 1 if self.failures else 0


def run(args: list, **kw) -> subprocess.CompletedProcess:
    """Runs a command; raises with the end of its stderr when it fails."""
    args = [str(a) for a in args]
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return p
