"""DataLoader workers and the tpu device: a worker that creates a tpu tensor
fails at once with a message that says what to do (never a hang), with fork
or spawn, whether or not the main process already used the device; workers
returning CPU tensors with pin_memory=True (pinned for tpu, the
accelerator) train as usual."""
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys, torch, torch_tpu
    from torch.utils.data import DataLoader, Dataset

    class OnTpu(Dataset):
        def __len__(self): return 8
        def __getitem__(self, i): return torch.full((3,), float(i), device="tpu")

    class OnCpu(Dataset):
        def __len__(self): return 8
        def __getitem__(self, i): return torch.full((3,), float(i))

    if __name__ == "__main__":
        context, parent_uses_device = sys.argv[1], sys.argv[2] == "1"
        if parent_uses_device:
            torch.ones(1, device="tpu").cpu()
        try:
            next(iter(DataLoader(OnTpu(), batch_size=4, num_workers=1, multiprocessing_context=context)))
            print("NO ERROR")
        except RuntimeError as e:
            print("RAISED", str(e).replace("\\n", " "))
        total = torch.zeros(3, device="tpu")
        for b in DataLoader(OnCpu(), batch_size=4, num_workers=2, multiprocessing_context=context,
                            pin_memory=True):
            total += b.to("tpu", non_blocking=True).sum(0)
        print("SUM", total.cpu().tolist())
""")


@pytest.mark.parametrize("context,parent_uses_device", [
    ("fork", "0"), ("fork", "1"), ("spawn", "0"), ("spawn", "1"),
])
def test_worker_using_tpu_fails_fast_and_cpu_workers_work(tmp_path, context, parent_uses_device):
    script = tmp_path / "loader.py"
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script), context, parent_uses_device],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RAISED" in r.stdout, r.stdout + r.stderr[-3000:]
    if parent_uses_device == "1" and context == "fork":
        assert "forked subprocess" in r.stdout
    else:
        assert "DataLoader worker process cannot use the tpu device" in r.stdout
    assert "SUM [28.0, 28.0, 28.0]" in r.stdout
