def init_process_group(*a, **k):
    return None
