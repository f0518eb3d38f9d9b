"""A context manager the bytecode tests run `with` blocks over."""


class LoggingContext:
    """Appends "enter" and "exit <exception class or None>" to `log`; `swallow` makes
    `__exit__` suppress the exception."""

    def __init__(self, log, swallow=False):
        self.log, self.swallow = log, swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(f"exit {kind.__name__ if kind else None}")
        return self.swallow
