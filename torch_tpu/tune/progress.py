"""The progress display: one line per measurement on stderr, with the run's
elapsed time against its budget, what runs now and what it measured."""
import sys
import time


class Progress:
    def __init__(self, budget_s, enabled=True, stream=None):
        self.t0, self.budget_s, self.enabled = time.monotonic(), budget_s, enabled
        self.stream = stream or sys.stderr
        self.n = 0

    def elapsed(self):
        return time.monotonic() - self.t0

    def _say(self, text):
        if self.enabled:
            e = self.elapsed()
            print(f"[tune {e:5.0f}/{self.budget_s:.0f} s] {text}", file=self.stream, flush=True)

    def start(self, what):
        self.n += 1
        self._say(f"#{self.n} measuring {what} ...")

    def done(self, what, result):
        if result["status"] == "ok":
            self._say(f"#{self.n} {what}: {result['step_s'] * 1e3:.2f} ms/step "
                      f"(process {result['process_s']:.1f} s)")
        else:
            self._say(f"#{self.n} {what}: {result['status']} ({result.get('reason', '')[:120]})")

    def note(self, text):
        self._say(text)
