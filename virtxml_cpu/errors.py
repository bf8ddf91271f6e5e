"""Error types that carry the CLI exit code, so every shell maps failures the same way."""

EXIT_OK = 0
EXIT_WORK_FOUND = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3


def shown(path: str) -> str:
    """A file name for a one-line message: control characters (a newline in a name) escaped."""
    return path if path.isprintable() else repr(path)[1:-1]


def shown_lines(text: str) -> str:
    """Text of several lines (a diff, a question) for a terminal: each line escaped as shown() escapes a
    name, so a C0/C1 control (ESC, CSI U+009B), a CR or a bidi override (U+202E) from a definition can
    neither move the cursor nor reorder what follows; newlines stay line breaks and tabs stay tabs."""
    return "\n".join("\t".join(shown(part) for part in line.split("\t")) for line in text.split("\n"))


def failure(e: BaseException) -> str:
    """An exception as one line for a report: our own errors say what went wrong; anything else is a fault
    of ours and is named as such, with its type."""
    text = str(e).splitlines()[0] if str(e) else ""
    return text if isinstance(e, VirtxmlCpuError) else f"internal error ({type(e).__name__}: {text})"


class VirtxmlCpuError(Exception):
    """Base error: a one-line message and an exit status."""

    exit_code = EXIT_BAD_INPUT


class BadInput(VirtxmlCpuError):
    """The XML, config or arguments are unusable (exit 2)."""

    exit_code = EXIT_BAD_INPUT


class EnvironmentProblem(VirtxmlCpuError):
    """libvirt unreachable, permission denied, disk full (exit 3)."""

    exit_code = EXIT_ENVIRONMENT


class AccessDenied(EnvironmentProblem):
    """libvirt refused this user (its socket's permissions, polkit, an access driver): exit 3, told apart so
    a program can say what to do about it (administrative access, the libvirt group)."""


class HostTimeout(EnvironmentProblem):
    """A libvirt peer that accepted the connection but did not answer in time (exit 3; not "refused")."""
