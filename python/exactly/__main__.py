"""`python -m exactly ARGS`: the `exactly` command line, run in-process."""

import sys

from . import _exactly

if __name__ == "__main__":
    sys.exit(_exactly.main(["python -m exactly", *sys.argv[1:]]))
