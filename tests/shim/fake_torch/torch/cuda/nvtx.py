_stack = []


def range_push(msg):
    _stack.append(msg)
    return len(_stack) - 1


def range_pop():
    _stack.pop()
    return len(_stack)
