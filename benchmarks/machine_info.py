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


def save_results(doc, out_dir, stem, started):
    """Writes `doc` as out_dir/<stem>_<UTC stamp>.json and a copy as
    <stem>_latest.json; returns the stamped path."""
    import json
    import os
    import shutil

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{stem}_{started.strftime('%Y%m%dT%H%M%SZ')}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    shutil.copyfile(path, os.path.join(out_dir, f"{stem}_latest.json"))
    return path
