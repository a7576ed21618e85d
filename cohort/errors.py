"""The one exception type the CLI turns into a one-line error and exit status."""


class CohortError(Exception):
    """A user-facing failure: bad input, a missing tool, a target that cannot run."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status
