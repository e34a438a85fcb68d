def init_process_group(*a, **k):
    if k.get("fail"):
        raise RuntimeError("NCCL timed out")
    return None
