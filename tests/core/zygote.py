"""A warm process that forks mltrain runs on request, for tests that start and kill many of them.

Each run is a real mltrain process (its own PID and session, its own signal handlers, children
that die with it), forked from a parent that has already imported the orchestrator, so that a
trial does not pay the interpreter's and scipy's start-up (2 to 3 s on two busy cores) again.
Protocol, one JSON line each way: ``{"run": [args], "env": {...}, "log": path}`` -> ``{"pid": n}``;
``{"wait": pid}`` -> ``{"code": returncode}`` (negative: killed by that signal).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SERVE = """
import json, os, sys
import orchestrator.cli, orchestrator.session.loop, orchestrator.render.tables, orchestrator.runners.local
for line in sys.stdin:
    request = json.loads(line)
    if "run" in request:
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.environ.update(request["env"])
            log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            sys.stdin = open(os.devnull)
            sys.argv = ["mltrain", *request["run"]]
            code = orchestrator.cli.main(request["run"])
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)
    else:
        _, status = os.waitpid(request["wait"], 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
"""


class Zygote:
    def __init__(self, project: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", SERVE], cwd=project, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, start_new_session=True)

    def _ask(self, request: dict) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def run(self, args: list[str], env: dict[str, str], log: Path) -> int:
        return self._ask({"run": args, "env": env, "log": str(log)})["pid"]

    def wait(self, pid: int) -> int:
        return self._ask({"wait": pid})["code"]

    def close(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):  # left open, each is a ResourceWarning later
            if pipe is not None:
                pipe.close()
        self.process.wait(timeout=30)
