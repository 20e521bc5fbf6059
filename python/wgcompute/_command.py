"""The ``wgcompute`` console script: the command line of the Rust command (``wgcompute devices``, ``demo``,
``fit``, ``bench``, ...), run through the extension, so that installing the package installs the command."""

from __future__ import annotations

import signal
import sys

from . import _wgcompute


def main() -> None:
    """Runs ``wgcompute`` with this process's arguments and exits with its status."""
    # Ctrl-C stops the command as it stops the binary: Python's own handler would only set a flag that nothing
    # checks while the command runs.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(_wgcompute.run_command(sys.argv))


if __name__ == "__main__":
    main()
