"""Run fuzz cases in a long-lived child process (``_files_worker.py``) under a
memory limit (RLIMIT_AS) and a timeout per case: a crash, an abort or a
kill by the limit is seen as the child's death, a hang as a timeout, and the
child is restarted for the next case. Shared by the crafted-file and
corrupted-corpus suites."""
import json
import os
import resource
import select
import subprocess
import sys
from pathlib import Path

MEMORY = 2 << 30        # bytes of address space of the child
TIMEOUT = 60.0          # seconds per case


class Worker:
    """One child (the script ``script``, by default ``_files_worker.py``) that reads
    one line per case (``encode(case)``, by default JSON) and answers one JSON line."""

    def __init__(self, memory=MEMORY, timeout=TIMEOUT, script=None, encode=json.dumps):
        self.proc, self.memory, self.timeout, self.encode = None, memory, timeout, encode
        self.script = Path(script) if script is not None else Path(__file__).with_name("_files_worker.py")

    def start(self):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if "libasan" in env.get("LD_PRELOAD", ""):
            # the sanitizer job (.ci/sanitize): ASan reserves terabytes of address space for its
            # shadow memory, so the limit is on the resident memory instead (ASan kills the child)
            limit = None
            env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS", ""),
                                                         f"hard_rss_limit_mb={self.memory >> 20}"]))
        else:
            def limit():
                resource.setrlimit(resource.RLIMIT_AS, (self.memory, self.memory))
        self.proc = subprocess.Popen([sys.executable, str(self.script)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=limit,
                                     env=env)

    def run(self, case):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        try:
            self.proc.stdin.write(self.encode(case) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        if not ready:
            self.proc.kill()
        rc = self.proc.wait()
        return {"outcome": "timeout" if not ready else "died", "returncode": rc}

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
