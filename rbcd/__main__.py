"""``python -m rbcd`` and the ``rbcd`` console script: see :mod:`rbcd.cli`."""
import sys


def main(argv=None):
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    from .cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
