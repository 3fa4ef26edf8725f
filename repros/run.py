"""Runs every script of repros/claims.json with this Python and records what each printed in
reports/repros/<folder>-<script>.txt (docs/spec/py-backend.md#repros):

    NLC_FLA_PYTHON=/path/to/venv/bin/python; $NLC_FLA_PYTHON repros/run.py

Each record starts with the versions of Python, torch, triton and fla, the device, the date, the
exit status, and then the script's output with Python's warnings left out. Exit 1 when a script did
not end SHOWN (exit 0).
"""
import datetime
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def versions() -> str:
    out = [f"python {platform.python_version()}"]
    for mod in ("torch", "triton", "fla"):
        try:
            out.append(f"{mod} {__import__(mod).__version__}")
        except Exception as e:  # noqa: BLE001
            out.append(f"{mod} unavailable ({type(e).__name__})")
    return ", ".join(out)


def main() -> int:
    claims = json.load(open(os.path.join(ROOT, "repros", "claims.json")))["claims"]
    scripts = sorted({c["script"] for c in claims})
    head = versions()
    import torch
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.machine()}), Triton's interpreter"
    os.makedirs(os.path.join(ROOT, "reports", "repros"), exist_ok=True)
    bad = []
    for script in scripts:
        p = subprocess.run([sys.executable, "-W", "ignore", os.path.join(ROOT, script)], cwd=ROOT, capture_output=True, text=True)
        lines = [ln for ln in (p.stdout + p.stderr).splitlines() if "Warning" not in ln and "warn" not in ln.split(":")[0]]
        name = "-".join(script.split("/")[1:]).removesuffix(".py") + ".txt"
        record = [f"# {script}", f"# {head}", f"# device: {device}",
                  f"# date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
                  f"# exit status: {p.returncode}", *lines]
        with open(os.path.join(ROOT, "reports", "repros", name), "w") as f:
            f.write("\n".join(record) + "\n")
        verdict = next((ln for ln in reversed(lines) if ln.startswith(("SHOWN", "NOT SHOWN"))), lines[-1] if lines else "(no output)")
        print(f"{script}: exit {p.returncode}; {verdict}")
        if p.returncode != 0:
            bad.append(script)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
