"""The shape of a JSON document that rtaccel wrote and reads back: a run's
summary, the interposer's lock report. Checked once where the file is read,
so that one of another shape (edited, cut short, another program's or
another version's) is refused with where it departs, not met later as a
traceback.

A shape is a type or a tuple of types; a dict of the keys' shapes (other
keys are let be); a list of one shape, which every item has; optional(S),
a key that may be absent; nullable(S), a value that may be null."""

import json


class _Optional:
    def __init__(self, shape):
        self.shape = shape


class _Nullable:
    def __init__(self, shape):
        self.shape = shape


def optional(shape) -> _Optional:
    return _Optional(shape)


def nullable(shape) -> _Nullable:
    return _Nullable(shape)


NUMBER = (int, float)


def error(value, shape, where: str = "") -> str | None:
    """Where VALUE departs from SHAPE, as 'chains[2].max_us is "x"', or None."""
    if isinstance(shape, _Nullable):
        return None if value is None else error(value, shape.shape, where)
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{where or 'the file'} is not an object"
        for key, sub in shape.items():
            at = f"{where}.{key}" if where else key
            if key not in value:
                if isinstance(sub, _Optional):
                    continue
                return f"{at} is missing"
            if why := error(value[key], sub.shape if isinstance(sub, _Optional) else sub, at):
                return why
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where or 'the file'} is not a list"
        return next((why for i, item in enumerate(value) if (why := error(item, shape[0], f"{where}[{i}]"))), None)
    kinds = shape if isinstance(shape, tuple) else (shape,)
    # bool is an int to isinstance; a count or a time is not a bool.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        return f"{where or 'the file'} is {json.dumps(value)[:40]}"
    return None
