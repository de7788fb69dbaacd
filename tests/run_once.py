"""A module fixture's value computed once per test run, shared by the
pytest-xdist workers: the first worker to ask computes it, the others wait
on a lock and read it. (The project's xdist_group marks do not group tests
under pytest 9.2 with pytest-xdist 3.8, so each worker would otherwise run
the fixture itself.)"""
import fcntl
import pickle


def once_per_run(tmp_path_factory, testrun_uid, name, compute):
    """compute()'s value (picklable), computed by one worker of this run."""
    shared = tmp_path_factory.getbasetemp().parent / f"{name}_{testrun_uid}.pickle"
    with open(shared.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if shared.exists():
            return pickle.loads(shared.read_bytes())
        value = compute()
        shared.write_bytes(pickle.dumps(value))
        return value
