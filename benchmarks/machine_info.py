"""What a benchmark's JSON records about the machine it ran on."""
import os
import platform


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": model or platform.processor(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "load_avg_at_start": os.getloadavg()}
