"""What gpuctl's failures are, and the exit codes they end with."""

from __future__ import annotations

EXIT_OK, EXIT_ERROR, EXIT_SPEC = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what `cat` or kubectl end with when the reader went away


class CliError(Exception):
    """An error the user can act on: printed as `gpuctl: error: MESSAGE`, then exit with `exit_code`."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR):
        super().__init__(message)
        self.exit_code = exit_code


class SpecRefused(CliError):
    """The server's 400 on a spec: one `FILE:LINE:COL: FIELD: MESSAGE` line per error."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines), EXIT_SPEC)
        self.lines = lines


def one_line(text: str) -> str:
    """Any message on a single line: the server's words may hold newlines."""
    return " ".join(str(text).split())
