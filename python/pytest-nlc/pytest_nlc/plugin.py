"""The nl-conformance checks of a kernel repository as pytest items.

pytest collects `nlc.config.json` (or `[tool.nlc]` in `pyproject.toml`, the same keys): the checks
the config selects (`nlc --list`) become one item each, named by the check's id, plus one item
`run` for the run's own verdict (it fails when the run tested nothing, or nlc itself failed). The
first item of a config to run starts one `nlc` run for all of them, narrowed with `--filter` to the
items left after `-k`/`-m`/deselection, and each item reads its check's result from that run's
JSON report: pass; fail (fail, vacuous, error) with the check's message and replay line; skip
with its reason. `nlc` is the installed package's command (node_modules/nl-conformance, found from
the config's directory upwards, or --nlc-bin), run with the `node` on PATH in the config's
directory; `py:` kernels run under the Python that runs pytest unless NLC_TORCH_PYTHON names one.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

CONFIG = "nlc.config.json"
PACKAGE = "nl-conformance"
CHECK_ID = re.compile(r"^C\d+/\S+$")
FAILED = ("fail", "vacuous", "error")
RUN_ITEM = "run"

RUNS = pytest.StashKey[list]()


class NlcError(Exception):
    """nlc could not be started or refused the config: shown as the message alone."""


def pytest_addoption(parser):
    group = parser.getgroup("nlc", "nl-conformance checks (pytest-nlc)")
    group.addoption("--nlc-bin", metavar="PATH", help=f"the nlc command to run (default: node_modules/{PACKAGE}/bin/nlc.js from the config's directory upwards)")
    group.addoption("--nlc-report", metavar="PATH", help="where the run writes its JSON report, relative to the config's directory (default: a temporary file)")
    group.addoption("--nlc-args", metavar="ARGS", default="", help="more options for nlc, e.g. '--profile quick'")


def pytest_configure(config):
    config.stash[RUNS] = []


def tool_nlc(pyproject: Path) -> dict | None:
    """`[tool.nlc]` of a pyproject.toml, or None."""
    try:
        with pyproject.open("rb") as f:
            section = tomllib.load(f).get("tool", {}).get("nlc")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return section if isinstance(section, dict) else None


def pytest_collect_file(file_path, parent):
    if file_path.name == CONFIG:
        return NlcFile.from_parent(parent, path=file_path)
    if file_path.name == "pyproject.toml" and not (file_path.parent / CONFIG).exists() and tool_nlc(file_path) is not None:
        return NlcFile.from_parent(parent, path=file_path)
    return None


def find_nlc(start: Path) -> Path | None:
    """node_modules/nl-conformance/bin/nlc.js in start or a directory above it (Node's own lookup)."""
    for d in [start, *start.parents]:
        bin_js = d / "node_modules" / PACKAGE / "bin" / "nlc.js"
        if bin_js.is_file():
            return bin_js
    return None


class NlcFile(pytest.File):
    """A config: its checks as items, and the one nlc run that judges them."""

    def setup_command(self):
        cwd = self.path.parent
        opt = self.config.getoption
        given = opt("nlc_bin")
        nlc = Path(given).resolve() if given else find_nlc(cwd)
        if nlc is None or not nlc.is_file():
            where = f"--nlc-bin {given}" if given else f"node_modules/{PACKAGE} in {cwd} or a directory above it"
            raise NlcError(f"{self.path}: nl-conformance is not installed ({where} not found); install it with npm i -D {PACKAGE}")
        cmd = [str(nlc)]
        if nlc.suffix in (".js", ".mjs"):
            node = shutil.which("node")
            if node is None:
                raise NlcError(f"{self.path}: no 'node' on PATH; nl-conformance's nlc runs under Node.js 20 or later")
            cmd = [node, str(nlc)]
        if self.path.name == CONFIG:
            cmd += ["--config", str(self.path)]
        else:  # [tool.nlc]: the same keys, as a config file the run reads
            fd, json_path = tempfile.mkstemp(prefix="nlc-pyproject-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(tool_nlc(self.path), f)
            self.config.add_cleanup(lambda: os.unlink(json_path))
            cmd += ["--config", json_path]
        cmd += shlex.split(opt("nlc_args") or "")
        env = dict(os.environ)
        env.setdefault("NLC_TORCH_PYTHON", sys.executable)
        self.cwd, self.cmd, self.env = cwd, cmd, env

    def collect(self):
        self.setup_command()
        r = subprocess.run([*self.cmd, "--list"], cwd=self.cwd, env=self.env, capture_output=True, text=True)
        if r.returncode != 0:
            raise NlcError(f"{self.path}: nlc --list exited {r.returncode}:\n{(r.stdout + r.stderr).strip()}")
        self.ids = [line.strip() for line in r.stdout.splitlines() if CHECK_ID.match(line.strip())]
        self.run = None
        for check_id in self.ids:
            yield NlcItem.from_parent(self, name=check_id)
        yield NlcRunItem.from_parent(self, name=RUN_ITEM)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, NlcError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def results(self, items=None) -> "Run":
        """The run of this config's checks (started on first use), narrowed to the items selected."""
        if self.run is not None:
            return self.run
        chosen = [i.name for i in (self.session.items if items is None else items) if type(i) is NlcItem and i.parent is self]
        filters = [] if len(chosen) == len(self.ids) else [a for c in chosen for a in ("--filter", c)]
        report_opt = self.config.getoption("nlc_report")
        report = (self.cwd / report_opt) if report_opt else Path(tempfile.mkdtemp(prefix="nlc-pytest-")) / "conformance.json"
        started = time.time()
        r = subprocess.run([*self.cmd, "--report", str(report), *filters], cwd=self.cwd, env=self.env, capture_output=True, text=True)
        self.run = Run(report, started, r.returncode, r.stdout + r.stderr, narrowed=bool(filters))
        self.config.stash[RUNS].append((self.path, self.run))
        return self.run


class Run:
    """One nlc run: its exit status, its output and the checks of the report it wrote."""

    def __init__(self, report: Path, started: float, code: int, out: str, narrowed: bool):
        self.code, self.out, self.narrowed = code, out, narrowed
        # a run that did not pass is written beside a passing report (<name>.failed.json)
        failed = report.with_name(report.stem + ".failed.json")
        written = [p for p in (failed, report) if p.is_file() and p.stat().st_mtime >= started - 1]
        self.report = written[0] if written else None
        self.checks, self.unimplemented = {}, set()
        if self.report is not None:
            doc = json.loads(self.report.read_text())
            self.checks = {c["id"]: c for c in doc["checks"]}
            # the rules its kernels do not implement (docs/spec/conformance.md#undeclared), frozen variants as their rule
            for backend in doc["run"]["backends"]:
                variants = backend.get("unimplemented", {}).get("variants", [])
                self.unimplemented.update(v.removesuffix(".frozen") for v in variants)

    def tail(self, lines=40) -> str:
        return "\n".join(self.out.strip().splitlines()[-lines:])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """After -k/-m: run each config's selected checks, and deselect the checks of rules its kernels
    do not implement (the report's run.backends[].unimplemented: they are no checks of the run), so
    they appear neither as passes nor as skips."""
    files = []
    for i in items:
        if isinstance(i, NlcItem) and i.parent not in files:
            files.append(i.parent)
    dropped = []
    for f in files:
        run = f.results(items)
        for i in items:
            if type(i) is NlcItem and i.parent is f and i.name not in run.checks and i.name.split("/")[2].removesuffix(".frozen") in run.unimplemented:
                dropped.append(i)
    if dropped:
        gone = set(map(id, dropped))
        items[:] = [i for i in items if id(i) not in gone]
        config.hook.pytest_deselected(items=dropped)


class NlcCheckFailed(Exception):
    pass


class NlcItem(pytest.Item):
    """One conformance check."""

    def runtest(self):
        run = self.parent.results()
        if run.report is None:
            raise NlcCheckFailed(f"nlc wrote no report (exit {run.code}):\n{run.tail()}")
        check = run.checks.get(self.name)
        if check is None:
            raise NlcCheckFailed(f"{self.name} is not in the run's report {run.report}")
        status, message = check["status"], check.get("message", "")
        if status == "skip":  # located at the config, not in this file
            raise pytest.skip.Exception(message or "skipped by nlc", _use_item_location=True)
        if status in FAILED:
            raise NlcCheckFailed(f"{status}: {message}\nreplay: {check['replay']}")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, NlcCheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"nlc check {self.name}"


class NlcRunItem(NlcItem):
    """The run's own verdict: fails when it tested nothing (nlc's `nothing ran` lines) or nlc failed."""

    def runtest(self):
        run = self.parent.results()
        nothing = [line for line in run.out.splitlines() if "nothing ran" in line]
        if nothing:
            raise NlcCheckFailed("\n".join(nothing))
        judged = any(c["status"] in FAILED for c in run.checks.values())
        if run.code != 0 and not (run.code == 1 and judged):
            raise NlcCheckFailed(f"nlc exited {run.code}:\n{run.tail()}")

    def reportinfo(self):
        return self.path, 0, "nlc run"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for path, run in config.stash.get(RUNS, []):
        closing = [line for line in run.out.splitlines() if line.startswith("conformance: ")]
        terminalreporter.write_line(f"nlc ({path.name}): {closing[-1] if closing else f'exit {run.code}'}; report {run.report}")
